// AVX2/FMA variant of paged_attention_head (attention.cpp picks it where AVX-512 is absent), for
// head_dim 32, 64, 96 or 128, in attention.h's order bit for bit:
//   scores: per key, lanes 0..7 and 8..15 of its 16 fma chains in two vectors; four keys at a time,
//           for independent chains, and their four tree16 sums taken together by shuffles;
//   softmax: attention_exp 8 lanes at a time (the same operations), the 16 double partial sums in
//           four 4-lane vectors;
//   p @ V:  lanes are d; the even and odd keys' chains in separate accumulators, over 32 columns
//           at a time (8 of the 16 registers).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/attention_impl.h"

namespace llmctl::kernels::detail {

namespace {

inline __m256 exp8(__m256 x) {  // attention_exp on 8 lanes of x <= 0
  using C = ExpConstants;
  const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q), low = _mm256_cmp_ps(x, _mm256_set1_ps(C::kMin), _CMP_LT_OQ);
  const __m256 n =
      _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(C::kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-C::kLn2Hi), x);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(-C::kLn2Lo), r);
  __m256 p = _mm256_set1_ps(C::kPoly[0]);
  for (int i = 1; i < 8; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(C::kPoly[i]));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  __m256 y = _mm256_andnot_ps(low, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
  return _mm256_blendv_ps(y, x, nan);
}

// tree16 of four keys' lane sums at once, the same additions in the same order: returns the four
// sums in key order. Each step adds, across keys, what tree16 adds within one.
inline __m128 tree16x4(const __m256* lo, const __m256* hi) {
  auto level = [](const __m256* v) {
    // per pair of keys: lanes (a0 + a2, a1 + a3, b0 + b2, b1 + b3 | a4 + a6, a5 + a7, b4 + b6, b5 + b7)
    const __m256 s01 = _mm256_add_ps(_mm256_shuffle_ps(v[0], v[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                     _mm256_shuffle_ps(v[0], v[1], _MM_SHUFFLE(3, 2, 3, 2)));
    const __m256 s23 = _mm256_add_ps(_mm256_shuffle_ps(v[2], v[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                     _mm256_shuffle_ps(v[2], v[3], _MM_SHUFFLE(3, 2, 3, 2)));
    // (P of keys 0..3 from lanes 0..3 | the next P from lanes 4..7), each (x0 + x2) + (x1 + x3)
    return _mm256_add_ps(_mm256_shuffle_ps(s01, s23, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm256_shuffle_ps(s01, s23, _MM_SHUFFLE(3, 1, 3, 1)));
  };
  const __m256 p01 = level(lo), p23 = level(hi);  // (P0 | P1), (P2 | P3) of the four keys
  return _mm_add_ps(_mm_add_ps(_mm256_castps256_ps128(p01), _mm256_extractf128_ps(p01, 1)),
                    _mm_add_ps(_mm256_castps256_ps128(p23), _mm256_extractf128_ps(p23, 1)));
}

template <int C>  // C = head_dim / 16
void attention_head(const float* q, const PagedKvView& c, const int32_t* block_table, int32_t position, int64_t kvh,
                    float scale, float* scores, float* out) {
  constexpr int64_t D = C * 16;
  const int32_t n = position + 1;
  float m = -INFINITY;
  KvRowCursor krows(c.k, c, block_table, kvh);
  for (int32_t j0 = 0; j0 < n; j0 += 4) {
    const int keys = std::min<int32_t>(4, n - j0);
    __m256 lo[4], hi[4];
    const float* kr[4];
    for (int kk = 0; kk < 4; ++kk) {
      lo[kk] = hi[kk] = _mm256_setzero_ps();
      kr[kk] = kk < keys ? krows.next() : kr[0];  // past the last key: recompute key j0, unused
    }
    for (int i = 0; i < C; ++i) {
      const __m256 q0 = _mm256_loadu_ps(q + 16 * i), q1 = _mm256_loadu_ps(q + 16 * i + 8);
      for (int kk = 0; kk < 4; ++kk) {
        lo[kk] = _mm256_fmadd_ps(q0, _mm256_loadu_ps(kr[kk] + 16 * i), lo[kk]);
        hi[kk] = _mm256_fmadd_ps(q1, _mm256_loadu_ps(kr[kk] + 16 * i + 8), hi[kk]);
      }
    }
    alignas(16) float s4[4];
    _mm_store_ps(s4, _mm_mul_ps(tree16x4(lo, hi), _mm_set1_ps(scale)));
    for (int kk = 0; kk < keys; ++kk) {
      scores[j0 + kk] = s4[kk];
      m = std::max(m, s4[kk]);
    }
  }
  __m256d part[4];  // partials 4i..4i+3
  for (auto& p : part) p = _mm256_setzero_pd();
  for (int32_t j0 = 0; j0 < n; j0 += 16)
    for (int h = 0; h < 2; ++h) {
      const int live = std::clamp<int32_t>(n - j0 - 8 * h, 0, 8);
      const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
      const __m256 keep = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(live), lanes));
      float* s = scores + j0 + 8 * h;
      const __m256 e = _mm256_and_ps(keep, exp8(_mm256_sub_ps(_mm256_loadu_ps(s), _mm256_set1_ps(m))));
      _mm256_storeu_ps(s, e);
      part[2 * h] = _mm256_add_pd(part[2 * h], _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
      part[2 * h + 1] = _mm256_add_pd(part[2 * h + 1], _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
  alignas(32) double sums[16];
  for (int i = 0; i < 4; ++i) _mm256_store_pd(sums + 4 * i, part[i]);
  const float inv = float(1.0 / detail::tree16(sums));
  for (int64_t d0 = 0; d0 < D; d0 += 32) {  // 32 columns: 4 vectors x even / odd keys
    __m256 acc[2][4];
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 4; ++i) acc[h][i] = _mm256_setzero_ps();
    KvRowCursor vrows(c.v, c, block_table, kvh);
    auto add_key = [&](int h, int32_t j) {
      const __m256 p = _mm256_set1_ps(scores[j] * inv);
      const float* vr = vrows.next() + d0;
      for (int i = 0; i < 4; ++i) acc[h][i] = _mm256_fmadd_ps(p, _mm256_loadu_ps(vr + 8 * i), acc[h][i]);
    };
    int32_t j = 0;
    for (; j + 1 < n; j += 2) add_key(0, j), add_key(1, j + 1);
    if (j < n) add_key(0, j);  // a last even key
    for (int i = 0; i < 4; ++i) _mm256_storeu_ps(out + d0 + 8 * i, _mm256_add_ps(acc[0][i], acc[1][i]));
  }
}

}  // namespace

bool paged_attention_head_avx2(const float* q, const PagedKvView& c, const int32_t* block_table, int32_t position,
                               int64_t kvh, float scale, float* scores, float* out) {
  switch (c.head_dim) {  // multiples of 32 up to 128 (P @ V takes 32 columns a pass)
    case 32: attention_head<2>(q, c, block_table, position, kvh, scale, scores, out); return true;
    case 64: attention_head<4>(q, c, block_table, position, kvh, scale, scores, out); return true;
    case 96: attention_head<6>(q, c, block_table, position, kvh, scale, scores, out); return true;
    case 128: attention_head<8>(q, c, block_table, position, kvh, scale, scores, out); return true;
    default: return false;
  }
}

}  // namespace llmctl::kernels::detail
