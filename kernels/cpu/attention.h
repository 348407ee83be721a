// Paged causal attention for one query token and one query head (CPU reference and production
// kernel). The cache is [NB, B, Hkv, D] f32; the token at `position` reads cache positions
// 0..position of its sequence through block_table.
#pragma once
#include <cstdint>

namespace llmctl::kernels {

struct PagedKvView {
  const float* k;  // [NB, B, Hkv, D]
  const float* v;
  int64_t block_size, num_kv_heads, head_dim;
};

// out[D] = softmax(q . K[0..position] * scale) @ V, for kv head kvh. scratch holds position + 1 floats.
void paged_attention_head(const float* q, const PagedKvView& cache, const int32_t* block_table, int32_t position,
                          int64_t kvh, float scale, float* scratch, float* out);

}  // namespace llmctl::kernels
