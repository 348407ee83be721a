// Rotary embedding and KV-cache writes on the fused projection qkv[T, (Hq + 2*Hkv) * D]
// (q heads, then k heads, then v heads; each head D contiguous values).
//
// rope (HF rotate-half layout): for each q and k head and i < R/2 (R = rotary_dim, or D), with
//   angle = float(positions[t]) * inv_freq[i]  (f32),  c = cos(angle), s = sin(angle):
//   a[i]       = a[i] * c - a[i + R/2] * s
//   a[i + R/2] = a[i + R/2] * c + a[i] * s
// and a[R..D) left as they are (partial rotary).
// write_kv: k_cache/v_cache [NB, B, Hkv, D]: cache[slot_mapping[t], h, :] = k/v head h of qkv[t]
//   (the slot is block * B + offset, so [NB*B, Hkv, D] indexing is the same); slot < 0 is skipped.
// The fused form rotates q and k in place and writes the rotated k (and v) in one pass.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/scalar_types.h"

namespace llmctl::cuda {

constexpr int kMaxRopeHalf = 128;  // head_dim <= 256

struct RopeKvParams {
  void* qkv; DType dtype;  // f32/f16/bf16; the cache has the same dtype
  const int32_t* positions;      // [T]   needed when do_rope
  const int32_t* slot_mapping;   // [T]   needed when do_write
  void* k_cache = nullptr; void* v_cache = nullptr;
  int64_t num_tokens;
  int num_q_heads, num_kv_heads, head_dim;
  int rotary_dim = 0;  // 0: head_dim
  bool do_rope = true, do_write = true;
  float inv_freq[kMaxRopeHalf];  // [D/2], passed by value: no device buffer, graph friendly
  // LongRoPE: positions >= long_from (when > 0) turn at inv_freq_long instead.
  float inv_freq_long[kMaxRopeHalf];
  int32_t long_from = 0;
  float attention_scaling = 1.f;  // multiplies cos and sin (YaRN, LongRoPE)
};
void launch_rope_write_kv(const RopeKvParams& p, cudaStream_t stream);

}  // namespace llmctl::cuda
