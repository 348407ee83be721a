// Quantized paged KV cache on CUDA, the same semantics as the CPU backend (kernels/cpu/kv_quant.h):
//   Int8: int8 codes [NB, B, Hkv, D] with (scale, zero) f32 [NB, B, Hkv, 2] per token and kv head,
//         dynamic and asymmetric: zero = the row's min, scale = (max - min) / 255,
//         code = clamp(rint((x - zero) / scale), 0, 255) - 128 (ties to even), x ~= (code + 128) * scale + zero;
//   Fp8:  e4m3 codes (U8) with one fixed f32 scale per kv head: code = e4m3(x / scale) (round to
//         nearest even, saturating at +-448: the hardware conversion), x ~= e4m3(code) * scale.
//
// write: cache[slot_mapping[t], h] = the quantized k / v head rows of qkv[t] (slot < 0: skipped).
// Attention reads the codes in place (attention.cuh, KvStorage; kv_codes.cuh).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/scalar_types.h"

namespace llmctl::cuda {

enum class KvQuantKind { Int8, Fp8 };

struct KvQuantWriteParams {
  KvQuantKind kind = KvQuantKind::Int8;
  const void* qkv = nullptr;  // [T, (Hq + 2*Hkv) * D], dtype
  DType dtype = DType::BF16;
  const int32_t* slot_mapping = nullptr;  // [T]
  void* k = nullptr;                      // codes [NB, B, Hkv, D]
  void* v = nullptr;
  float* k_scale = nullptr;  // Int8: [NB, B, Hkv, 2]; Fp8: [Hkv] (read only)
  float* v_scale = nullptr;
  int64_t num_tokens = 0;
  int num_q_heads = 0, num_kv_heads = 0, head_dim = 0;
};
void launch_kv_quant_write(const KvQuantWriteParams& p, cudaStream_t stream);

}  // namespace llmctl::cuda
