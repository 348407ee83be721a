// AVX2 + FMA variant of silu_mul_rows (elementwise.h), picked at run time where cpu_has_avx2().
// silu needs e^-g per element; libm's scalar expf was 6% of a quantized prefill. exp8 below is a
// vector e^x whose relative error is about 2 ulp; every element, the last partial vector of a row
// included (masked), goes through the same code, so a row's result does not depend on the rows
// beside it.
#include <immintrin.h>

#include <cstdint>
#include <initializer_list>

#include "kernels/cpu/elementwise_impl.h"

namespace llmctl::kernels::detail {

namespace {

// e^x for eight floats. x is clamped to [-87.3, 88] (e^x then stays a normal float: below it the
// result is 2^-126-ish, above it about 1.65e38). x = n ln2 + r with n = round(x / ln2) and
// |r| <= ln2 / 2, ln2 split into a short high part (n * hi is exact) and the rest; e^r by its Taylor
// polynomial of degree 7 (error r^8 / 8! < 1e-8); 2^n built in the exponent bits.
inline __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040);
  for (float c : {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f})
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
  const __m256i two_n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(two_n));
}

inline __m256 silu_mul8(__m256 g, __m256 u) {
  const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

}  // namespace

void silu_mul_rows_avx2(const float* gate_up, int64_t I, int64_t r0, int64_t r1, float* out) {
  const int64_t tail = I % 8;
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(tail)), lanes);  // lanes < tail
  for (int64_t r = r0; r < r1; ++r) {
    const float* g = gate_up + r * 2 * I;
    const float* u = g + I;
    float* o = out + r * I;
    int64_t i = 0;
    for (; i + 8 <= I; i += 8) _mm256_storeu_ps(o + i, silu_mul8(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i)));
    if (tail)
      _mm256_maskstore_ps(o + i, mask, silu_mul8(_mm256_maskload_ps(g + i, mask), _mm256_maskload_ps(u + i, mask)));
  }
}

}  // namespace llmctl::kernels::detail
