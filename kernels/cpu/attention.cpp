#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/attention_impl.h"
#include "kernels/cpu/linear.h"

namespace llmctl::kernels {

void paged_attention_head(const float* q, const PagedKvView& c, const int32_t* block_table, int32_t position,
                          int64_t kvh, float scale, float* scores, float* out) {
  // the same results, faster, where dot_f32 runs its AVX2 variant (the order it follows)
  if (cpu_has_avx2() && detail::paged_attention_head_avx2(q, c, block_table, position, kvh, scale, scores, out)) return;
  detail::paged_attention_head_portable(q, c, block_table, position, kvh, scale, scores, out);
}

namespace detail {
float softmax_unnormalized(float* scores, int32_t n, float m) {
  double denom = 0;
  for (int32_t j = 0; j < n; ++j) {
    scores[j] = std::exp(scores[j] - m);
    denom += scores[j];
  }
  return float(1.0 / denom);
}

void paged_attention_head_portable(const float* q, const PagedKvView& c, const int32_t* block_table, int32_t position,
                                   int64_t kvh, float scale, float* scores, float* out) {
  const int64_t D = c.head_dim, B = c.block_size;
  auto row = [&](const float* base, int32_t j) {
    const int64_t slot = int64_t(block_table[j / B]) * B + j % B;
    return base + (slot * c.num_kv_heads + kvh) * D;
  };
  float m = -INFINITY;
  for (int32_t j = 0; j <= position; ++j) {
    scores[j] = dot_f32(q, row(c.k, j), D) * scale;
    m = std::max(m, scores[j]);
  }
  const float inv = softmax_unnormalized(scores, position + 1, m);
  std::fill(out, out + D, 0.0f);
  for (int32_t j = 0; j <= position; ++j) {
    const float p = scores[j] * inv;
    const float* vr = row(c.v, j);
    for (int64_t d = 0; d < D; ++d) out[d] += p * vr[d];
  }
}
}  // namespace detail

}  // namespace llmctl::kernels
