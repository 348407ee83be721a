// AVX2 + FMA variants of silu_mul_cols, gelu_tanh_mul_cols and rms_norm_rows (elementwise.h), picked
// at run time where cpu_has_avx2().
// silu needs e^-g per element; libm's scalar expf was 6% of a quantized prefill (and libm's tanhf,
// through expm1f, 23% of a Gemma 3 shaped one's: GeGLU). exp8 below is a
// vector e^x whose relative error is about 2 ulp; every element, the last partial vector of a row
// included (masked), goes through the same code, so a row's result does not depend on the rows
// beside it.
#include <immintrin.h>

#include <cmath>
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

// gelu_tanh(g) * u as g / (1 + e^(-2a)) * u, a = sqrt(2 / pi) (g + 0.044715 g^3) formed as the
// portable variant forms it (elementwise.h). Below a = -44 e^(-2a) is clamped (exp8): g / 1.65e38.
inline __m256 gelu_tanh_mul8(__m256 g, __m256 u) {
  const __m256 cube = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.044715f), g), g), g);
  const __m256 a = _mm256_mul_ps(_mm256_set1_ps(0.7978845608028654f), _mm256_add_ps(g, cube));
  const __m256 e = exp8(_mm256_mul_ps(_mm256_set1_ps(-2.0f), a));
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

// out[r, c] = act(gate, up) for rows [r0, r1), columns [c0, c1) of gate_up[R, 2I], 8 at a time, the
// tail masked (each lane on its own: the same value in any group of 8).
template <class Act>
void gated_cols(const float* gate_up, int64_t I, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* out, Act act) {
  const int64_t tail = (c1 - c0) % 8;
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(tail)), lanes);  // lanes < tail
  for (int64_t r = r0; r < r1; ++r) {
    const float* g = gate_up + r * 2 * I;
    const float* u = g + I;
    float* o = out + r * I;
    int64_t i = c0;
    for (; i + 8 <= c1; i += 8) _mm256_storeu_ps(o + i, act(_mm256_loadu_ps(g + i), _mm256_loadu_ps(u + i)));
    if (tail) _mm256_maskstore_ps(o + i, mask, act(_mm256_maskload_ps(g + i, mask), _mm256_maskload_ps(u + i, mask)));
  }
}

}  // namespace

void silu_mul_cols_avx2(const float* gate_up, int64_t I, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* out) {
  gated_cols(gate_up, I, r0, r1, c0, c1, out, silu_mul8);
}

void gelu_tanh_mul_cols_avx2(const float* gate_up, int64_t I, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                             float* out) {
  gated_cols(gate_up, I, r0, r1, c0, c1, out, gelu_tanh_mul8);
}

// rms_norm_rows_portable's operations: the residual sums and the outputs 8 floats at a time (each the
// same single rounding), partials 0..3 and 4..7 of the sum of squares in two vectors of doubles (an
// FMA of double(x) * x, exact in double, is the portable product then sum), the tail masked to zero
// (adding +0.0 leaves a partial as it was: a sum of squares is never -0.0).
void rms_norm_rows_avx2(const float* x, const float* w, float eps, int64_t H, int64_t r0, int64_t r1, float* out,
                        float* residual) {
  const int64_t tail = H % 8;
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(int(tail)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * H;
    float* o = out + r * H;
    const float* src = xr;
    if (residual) {
      float* res = residual + r * H;
      int64_t i = 0;
      for (; i + 8 <= H; i += 8)
        _mm256_storeu_ps(res + i, _mm256_add_ps(_mm256_loadu_ps(res + i), _mm256_loadu_ps(xr + i)));
      for (; i < H; ++i) res[i] += xr[i];
      src = res;
    }
    __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= H; i += 8) {
      const __m256 v = _mm256_loadu_ps(src + i);
      const __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), b = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
      lo = _mm256_fmadd_pd(a, a, lo);
      hi = _mm256_fmadd_pd(b, b, hi);
    }
    if (tail) {
      const __m256 v = _mm256_maskload_ps(src + i, mask);
      const __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), b = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
      lo = _mm256_fmadd_pd(a, a, lo);
      hi = _mm256_fmadd_pd(b, b, hi);
    }
    alignas(32) double s[8];
    _mm256_store_pd(s, lo);
    _mm256_store_pd(s + 4, hi);
    const double ss = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    const float inv = 1.0f / std::sqrt(float(ss / double(H)) + eps);
    const __m256 vinv = _mm256_set1_ps(inv);
    for (i = 0; i + 8 <= H; i += 8)
      _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_loadu_ps(w + i), _mm256_mul_ps(_mm256_loadu_ps(src + i), vinv)));
    for (; i < H; ++i) o[i] = w[i] * (src[i] * inv);
  }
}

}  // namespace llmctl::kernels::detail
