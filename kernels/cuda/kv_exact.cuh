// The exact open-block rows beside a quantized KV cache (engine/backend/kv_exact_rows.h) on CUDA:
// after a step's attention, each sequence with an exact slot keeps the k and v rows of its last R
// blocks among the step's tokens, so the next step's queries find the rows of their own block that
// came before them (attention.cuh, AttentionParams::exact_slot).
//
// For sequence s (tokens query_start[s] .. query_start[s+1] - 1 at consecutive positions c0 .. c1 - 1):
// rows of positions [max(c0, ((c1 - 1) / B - (R - 1)) * B), c1) go from qkv to ring row
// slot * R * B + (q / B % R) * B + q % B of exact_k / exact_v [slots, R * B, Hkv, D].
// Earlier rows of the step would land on ring rows the later ones take.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/scalar_types.h"

namespace llmctl::cuda {

struct KvExactStoreParams {
  const void* qkv = nullptr;  // [T, (Hq + 2 * Hkv) * D], dtype (f16 / bf16 / f32), 16-byte aligned rows
  DType dtype = DType::BF16;
  const int32_t* positions = nullptr;    // [T]
  const int32_t* query_start = nullptr;  // [S + 1]
  const int32_t* token_seq = nullptr;    // [T]
  const int32_t* exact_slot = nullptr;   // [S], -1: none
  void* exact_k = nullptr;               // [slots, R * B, Hkv, D], dtype
  void* exact_v = nullptr;
  int num_tokens = 0, num_q_heads = 0, num_kv_heads = 0, head_dim = 0, block_size = 16, ring_blocks = 1;
};
void launch_kv_exact_store(const KvExactStoreParams& p, cudaStream_t stream);

}  // namespace llmctl::cuda
