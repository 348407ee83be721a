// AVX2/FMA variant of paged_attention_head (attention.cpp picks it where dot_f32 runs its AVX2
// variant), for head_dim 64 or 128. Bit for bit the portable kernel's results:
//   scores: each key's dot product is dot_f32_avx2's sequence (two 8-lane FMA accumulators over
//           blocks of 16, the same horizontal sum), inlined instead of called once per key;
//   softmax: the same expf, max and double denominator, in the same order;
//   p @ V:  per element out[d] = (...((0 + p0 v0[d]) + p1 v1[d]) ...), a multiply then an add
//           as the portable loop (compiled without FMA) does: the product goes through an empty asm
//           so the compiler cannot fuse it into an FMA. The accumulators stay in registers across
//           keys (the portable loop loads and stores out[] for every key).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/attention_impl.h"

namespace llmctl::kernels::detail {

namespace {

inline float hsum(__m256 a, __m256 b) {  // linear_avx2.cpp's order
  const __m256 s = _mm256_add_ps(a, b);
  const __m128 q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  const __m128 d = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(d, _mm_shuffle_ps(d, d, 1)));
}

template <int C>  // C = head_dim / 8
void attention_head(const float* q, const PagedKvView& c, const int32_t* block_table, int32_t position, int64_t kvh,
                    float scale, float* scores, float* out) {
  constexpr int64_t D = C * 8;
  const int64_t B = c.block_size;
  auto row = [&](const float* base, int32_t j) {
    const int64_t slot = int64_t(block_table[j / B]) * B + j % B;
    return base + (slot * c.num_kv_heads + kvh) * D;
  };
  __m256 qv[C];
  for (int i = 0; i < C; ++i) qv[i] = _mm256_loadu_ps(q + 8 * i);
  float m = -INFINITY;
  for (int32_t j = 0; j <= position; ++j) {
    const float* kr = row(c.k, j);
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    for (int i = 0; i < C; i += 2) {
      a0 = _mm256_fmadd_ps(qv[i], _mm256_loadu_ps(kr + 8 * i), a0);
      a1 = _mm256_fmadd_ps(qv[i + 1], _mm256_loadu_ps(kr + 8 * i + 8), a1);
    }
    scores[j] = hsum(a0, a1) * scale;
    m = std::max(m, scores[j]);
  }
  const float inv = softmax_unnormalized(scores, position + 1, m);
  __m256 acc[C];
  for (int i = 0; i < C; ++i) acc[i] = _mm256_setzero_ps();
  for (int32_t j = 0; j <= position; ++j) {
    const __m256 p = _mm256_set1_ps(scores[j] * inv);
    const float* vr = row(c.v, j);
    for (int i = 0; i < C; ++i) {
      __m256 prod = _mm256_mul_ps(p, _mm256_loadu_ps(vr + 8 * i));
      asm("" : "+x"(prod));  // no FMA: round the product as the portable loop does
      acc[i] = _mm256_add_ps(acc[i], prod);
    }
  }
  for (int i = 0; i < C; ++i) _mm256_storeu_ps(out + 8 * i, acc[i]);
}

}  // namespace

bool paged_attention_head_avx2(const float* q, const PagedKvView& c, const int32_t* block_table, int32_t position,
                               int64_t kvh, float scale, float* scores, float* out) {
  switch (c.head_dim) {
    case 64: attention_head<8>(q, c, block_table, position, kvh, scale, scores, out); return true;
    case 128: attention_head<16>(q, c, block_table, position, kvh, scale, scores, out); return true;
    default: return false;
  }
}

}  // namespace llmctl::kernels::detail
