// The variants behind attention.h's paged_attention_head (internal).
#pragma once
#include <cstdint>

#include "kernels/cpu/attention.h"

namespace llmctl::kernels::detail {

// scores[0, n) = exp(scores - m), m their maximum; returns 1 / their sum (accumulated in double).
// Defined once, in the portable file, so every variant normalizes with the same code.
float softmax_unnormalized(float* scores, int32_t n, float m);

// The portable kernel (any head_dim; dot products through dot_f32).
void paged_attention_head_portable(const float* q, const PagedKvView& c, const int32_t* block_table, int32_t position,
                                   int64_t kvh, float scale, float* scores, float* out);

// AVX2/FMA, head_dim 64 or 128 (returns false, doing nothing, for others): the portable kernel's
// results bit for bit. Call only where cpu_has_avx2() (kernels/cpu/linear.h).
bool paged_attention_head_avx2(const float* q, const PagedKvView& c, const int32_t* block_table, int32_t position,
                               int64_t kvh, float scale, float* scores, float* out);

}  // namespace llmctl::kernels::detail
