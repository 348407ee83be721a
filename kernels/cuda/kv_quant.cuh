// Quantized paged KV cache on CUDA, the same semantics as the CPU backend (kernels/cpu/kv_quant.h):
//   Int8: int8 codes [NB, B, Hkv, D] with (scale, zero) f32 [NB, B, Hkv, 2] per token and kv head,
//         dynamic and asymmetric: zero = the row's min, scale = (max - min) / 255,
//         code = clamp(rint((x - zero) / scale), 0, 255) - 128 (ties to even), x ~= (code + 128) * scale + zero;
//   Fp8:  e4m3 codes (U8) with one fixed f32 scale per kv head: code = e4m3(x / scale) (round to
//         nearest even, saturating at +-448: the hardware conversion), x ~= e4m3(code) * scale.
//
// write: cache[slot_mapping[t], h] = the quantized k / v head rows of qkv[t] (slot < 0: skipped).
// dequant_context: the cache positions a step's attention reads, as the activation dtype, into a
//   dense scratch paged cache [S * Mb, B, Hkv, D] whose block table is the identity (block s * Mb + i
//   holds logical block i of sequence s; blocks past context_len[s] or with table id -1 are left
//   unwritten and never read). The dense attention kernels then run on it unchanged (a first,
//   correct form: it moves the context once more than reading codes inside attention would).
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

struct KvDequantParams {
  KvQuantKind kind = KvQuantKind::Int8;
  const void* k = nullptr;  // codes [NB, B, Hkv, D]
  const void* v = nullptr;
  const float* k_scale = nullptr;
  const float* v_scale = nullptr;
  const int32_t* block_table = nullptr;  // [S, Mb], -1 padded
  const int32_t* context_len = nullptr;  // [S]
  int num_seqs = 0, max_blocks_per_seq = 0, block_size = 0, num_kv_heads = 0, head_dim = 0;
  DType dtype = DType::BF16;   // of the scratch cache
  void* k_out = nullptr;       // [S * Mb, B, Hkv, D]
  void* v_out = nullptr;
  int32_t* table_out = nullptr;  // [S, Mb]: s * Mb + i
};
// Bytes of one of k_out / v_out.
size_t kv_dequant_scratch_bytes(const KvDequantParams& p);
void launch_kv_dequant_context(const KvDequantParams& p, cudaStream_t stream);

}  // namespace llmctl::cuda
