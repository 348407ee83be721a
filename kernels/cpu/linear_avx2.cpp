// AVX2/FMA/F16C variant of linear_rows (compiled with -mavx2 -mfma -mf16c, chosen at run time).
// Each output element is reduced the same way whether its token is processed in a group of four
// or alone: two 8-lane accumulators over blocks of 16, a fixed horizontal sum, then a scalar tail.
#include <immintrin.h>

#include <cstdint>
#include <algorithm>
#include <cstring>

#include "kernels/cpu/linear_impl.h"

namespace llmctl::kernels::detail {

namespace {
struct LoadF32 {
  using T = float;
  static __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
  static float load1(const float* p) { return *p; }
};
struct LoadBF16 {
  using T = uint16_t;
  static __m256 load8(const uint16_t* p) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static float load1(const uint16_t* p) {
    uint32_t u = uint32_t(*p) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};
struct LoadF16 {
  using T = uint16_t;
  static __m256 load8(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static float load1(const uint16_t* p) { return _cvtsh_ss(*p); }
};

inline float hsum(__m256 a, __m256 b) {
  __m256 s = _mm256_add_ps(a, b);
  __m128 lo = _mm256_castps256_ps128(s), hi = _mm256_extractf128_ps(s, 1);
  __m128 q = _mm_add_ps(lo, hi);                 // 4 lanes
  __m128 d = _mm_add_ps(q, _mm_movehl_ps(q, q));  // 2 lanes
  __m128 r = _mm_add_ss(d, _mm_shuffle_ps(d, d, 1));
  return _mm_cvtss_f32(r);
}

// Dot products of NT tokens' rows of x with one weight row.
template <class L, int NT>
inline void dot_rows(const float* const* xs, const typename L::T* wr, int64_t K, float* res) {
  __m256 a0[NT], a1[NT];
  for (int j = 0; j < NT; ++j) a0[j] = a1[j] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= K; i += 16) {
    __m256 w0 = L::load8(wr + i), w1 = L::load8(wr + i + 8);
    for (int j = 0; j < NT; ++j) {
      a0[j] = _mm256_fmadd_ps(_mm256_loadu_ps(xs[j] + i), w0, a0[j]);
      a1[j] = _mm256_fmadd_ps(_mm256_loadu_ps(xs[j] + i + 8), w1, a1[j]);
    }
  }
  for (int j = 0; j < NT; ++j) {
    float s = hsum(a0[j], a1[j]);
    for (int64_t k = i; k < K; ++k) s += xs[j][k] * L::load1(wr + k);
    res[j] = s;
  }
}

template <class L>
void linear_impl(const float* x, int64_t T, int64_t K, const void* w, const float* bias, int64_t n0, int64_t n1,
                 float* out, int64_t ldo) {
  const auto* W = static_cast<const typename L::T*>(w);
  constexpr int kGroup = 4;
  constexpr int64_t kRowBlock = 16;  // weight rows kept hot in cache while every token passes over them
  for (int64_t nb = n0; nb < n1; nb += kRowBlock) {
    const int64_t ne = std::min(n1, nb + kRowBlock);
    int64_t t = 0;
    for (; t + kGroup <= T; t += kGroup) {
      const float* xs[kGroup] = {x + t * K, x + (t + 1) * K, x + (t + 2) * K, x + (t + 3) * K};
      for (int64_t n = nb; n < ne; ++n) {
        float r[kGroup];
        dot_rows<L, kGroup>(xs, W + n * K, K, r);
        for (int j = 0; j < kGroup; ++j) out[(t + j) * ldo + n] = bias ? r[j] + bias[n] : r[j];
      }
    }
    for (; t < T; ++t) {
      const float* xs[1] = {x + t * K};
      for (int64_t n = nb; n < ne; ++n) {
        float r[1];
        dot_rows<L, 1>(xs, W + n * K, K, r);
        out[t * ldo + n] = bias ? r[0] + bias[n] : r[0];
      }
    }
  }
}
}  // namespace

void linear_rows_avx2(const float* x, int64_t T, int64_t K, const void* w, WeightType wt, const float* bias,
                      int64_t n0, int64_t n1, float* out, int64_t ldo) {
  switch (wt) {
    case WeightType::F32: linear_impl<LoadF32>(x, T, K, w, bias, n0, n1, out, ldo); break;
    case WeightType::BF16: linear_impl<LoadBF16>(x, T, K, w, bias, n0, n1, out, ldo); break;
    case WeightType::F16: linear_impl<LoadF16>(x, T, K, w, bias, n0, n1, out, ldo); break;
  }
}

float dot_f32_avx2(const float* a, const float* b, int64_t n) {
  const float* xs[1] = {a};
  float r[1];
  dot_rows<LoadF32, 1>(xs, b, n, r);
  return r[0];
}

}  // namespace llmctl::kernels::detail
