// AVX2/FMA/F16C variant of the qlinear kernels (compiled with -mavx2 -mfma -mf16c, chosen at run time
// on CPUs without AVX-512 VNNI).
// Int8 mode, per block of 32 inputs: the codes (4 bits: low nibbles then high nibbles, which is the
// inputs' own order; 8 bits: |code| with the activations' signs flipped where the code is negative)
// meet the int8 activations in vpmaddubsw (u8 x s8 pairs -> s16, no saturation at these ranges),
// vpmaddwd sums pairs into 8 int32 lanes (lanes 0..3: inputs 0..15, 4..7: inputs 16..31); lanes
// become f32 and are multiplied-added by activation scale * weight scale into one accumulator per
// (row, token); then a fixed horizontal sum, the offsets' term (8 groups a vector, then the rest in
// order) and bias.
// F32 mode: per block, codes -> f32 -> scale * code + offset in registers; two accumulators per
// (row, token) (inputs 0..15 and 16..31), summed at the end.
// The per-(row, token) instruction sequence does not depend on the tile it falls in: results do not
// depend on T or on [n0, n1).
// Also the activation quantizer (quantize_act_blocks_avx2), run on any CPU with AVX2, the AVX-512
// ones included: the scalar variant's bytes, eight lanes at a time.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/qlinear_impl.h"
#include "kernels/kernel_check.h"

namespace llmctl::kernels::detail {

namespace {

constexpr int64_t kRowBlock = 16;

inline float hsum8(__m256 s) {
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  __m128 d = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(d, _mm_shuffle_ps(d, d, 1)));
}

// Scale or offset i from p (factored: the int8 m at p, the f16 D at d; rows_param's values).
template <ScaleType ST>
inline float load1(const void* p, const uint16_t* d, int64_t i) {
  if constexpr (ST == ScaleType::Factored)
    return _cvtsh_ss(d[i / kFactoredGroups]) * float(static_cast<const int8_t*>(p)[i]);
  else if constexpr (ST == ScaleType::F16)
    return _cvtsh_ss(static_cast<const uint16_t*>(p)[i]);
  else
    return static_cast<const float*>(p)[i];
}
// Elements i..i+7 (factored: i a multiple of 8, one D).
template <ScaleType ST>
inline __m256 load8(const void* p, const uint16_t* d, int64_t i) {
  if constexpr (ST == ScaleType::Factored) {
    int64_t m8;
    std::memcpy(&m8, static_cast<const int8_t*>(p) + i, 8);
    return _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(d[i / kFactoredGroups])),
                         _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(m8))));
  } else if constexpr (ST == ScaleType::F16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + i)));
  } else {
    return _mm256_loadu_ps(static_cast<const float*>(p) + i);
  }
}

// Offset i, or -0.0 where none are stored.
template <ScaleType ST>
inline float offset_or_zero(const QWeightView& w, int64_t i) {
  return w.offset ? load1<ST>(w.offset, w.offset_d, i) : -0.0f;
}

// sum_g offset[n, g] * S[t, g]: 8 groups a step, horizontal sum, then the remaining groups in order
// (factored: G is a multiple of 8, so each step is one super-block).
template <ScaleType ST>
inline float offset_term(const QWeightView& w, int64_t n, int64_t G, const float* S) {
  __m256 a = _mm256_setzero_ps();
  int64_t g = 0;
  for (; g + 8 <= G; g += 8) a = _mm256_fmadd_ps(load8<ST>(w.offset, w.offset_d, n * G + g), _mm256_loadu_ps(S + g), a);
  float s = hsum8(a);
  for (; g < G; ++g) s += load1<ST>(w.offset, w.offset_d, n * G + g) * S[g];
  return s;
}

// The groups of each block of 32 inputs' two halves: gt[2b] (inputs 0..15), gt[2b + 1] (16..31),
// made once per call (a division per block and tile measured as a third of a group-16 decode).
const int32_t* block_groups(const QWeightView& w) {
  thread_local std::vector<int32_t> gt;
  const int64_t blocks = w.k / 32;
  gt.resize(size_t(2 * blocks));
  for (int64_t b = 0; b < blocks; ++b)
    gt[size_t(2 * b)] = int32_t(b * 32 / w.group), gt[size_t(2 * b + 1)] = int32_t((b * 32 + 16) / w.group);
  return gt.data();
}

// Factored scales: the scales (which 0) or offsets (which 1) of rows n..n+NR-1 as f32 [NR, G], once
// per tile, 8 a step (the values load1 gives, bit for bit): into local when they fit (kLocalGroups),
// else a thread's buffer. Returns where they are.
constexpr int64_t kLocalGroups = 256;  // K up to 4096 in groups of 16
template <int NR>
const float* expand_factored(const QWeightView& w, int which, int64_t n, int64_t G, float* local) {
  float* buf = local;
  if (G > kLocalGroups) {
    thread_local std::vector<float> big[2];
    big[which].resize(size_t(NR * G));
    buf = big[which].data();
  }
  const void* m = which ? w.offset : w.scale;
  const uint16_t* d = which ? w.offset_d : w.scale_d;
  for (int r = 0; r < NR; ++r)
    for (int64_t g = 0; g < G; g += 8)
      _mm256_storeu_ps(buf + r * G + g, load8<ScaleType::Factored>(m, d, (n + r) * G + g));
  return buf;
}

template <int NR, int NT, bool FOUR, ScaleType ST>
void q8_tile(const QActivations& x, const QWeightView& w, const int32_t* gt, const float* S, const float* bias, int64_t n,
             int64_t t, float* out, int64_t ldo) {
  const int64_t K = w.k, G = K / w.group, rb = qweight_row_bytes(w.bits, K), blocks = K / 32;
  const int64_t ahead = std::max<int64_t>(4, 6144 / rb);
  const __m128i nib = _mm_set1_epi8(0x0F);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < NT; ++j) acc[r][j] = _mm256_setzero_ps();
  constexpr bool kF = ST == ScaleType::Factored;
  float fs_local[kF ? NR * kLocalGroups : 1];
  const float* fs = kF ? expand_factored<NR>(w, 0, n, G, fs_local) : nullptr;  // the offsets' term reads its own
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t glo = gt[2 * b], ghi = gt[2 * b + 1];
    __m256i wc[NR];
    __m256 s[NR];
    for (int r = 0; r < NR; ++r) {
      const uint8_t* row = w.packed + (n + r) * rb;
      // decode streams the weights once: fetch about 6 KB ahead (see qlinear_avx512.cpp)
      if (NT == 1 && n + r + ahead < w.n) _mm_prefetch(reinterpret_cast<const char*>(row + ahead * rb + b * (FOUR ? 16 : 32)), _MM_HINT_T0);
      if constexpr (FOUR) {
        const __m128i P = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + b * 16));
        wc[r] = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(P, 4), nib), _mm_and_si128(P, nib));
      } else {
        wc[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + b * 32));
      }
      const float sl = kF ? fs[r * G + glo] : load1<ST>(w.scale, w.scale_d, (n + r) * G + glo);
      const float sh = kF ? fs[r * G + ghi] : load1<ST>(w.scale, w.scale_d, (n + r) * G + ghi);
      s[r] = glo == ghi ? _mm256_set1_ps(sl) : _mm256_setr_m128(_mm_set1_ps(sl), _mm_set1_ps(sh));
    }
    for (int j = 0; j < NT; ++j) {
      const __m256i A = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + (t + j) * K + b * 32));
      const __m256 d = _mm256_set1_ps(x.scale[(t + j) * blocks + b]);
      for (int r = 0; r < NR; ++r) {
        __m256i p;
        if constexpr (FOUR)
          p = _mm256_maddubs_epi16(wc[r], A);
        else
          p = _mm256_maddubs_epi16(_mm256_abs_epi8(wc[r]), _mm256_sign_epi8(A, wc[r]));
        const __m256 f = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones));
        acc[r][j] = _mm256_fmadd_ps(f, _mm256_mul_ps(d, s[r]), acc[r][j]);
      }
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < NT; ++j) {
      // no offsets stored: every one -0, whose term is +0 (the scalar reference's, too)
      const float v = hsum8(acc[r][j]) + (w.offset ? offset_term<ST>(w, n + r, G, S + (t + j) * G) : 0.0f);
      out[(t + j) * ldo + n + r] = bias ? v + bias[n + r] : v;
    }
}

template <bool FOUR, ScaleType ST>
void q8_rows(const QActivations& x, const QWeightView& w, const float* bias, int64_t n0, int64_t n1, float* out,
             int64_t ldo) {
  const int64_t G = w.k / w.group;
  std::vector<float> S(static_cast<size_t>(x.t * G));
  qact_group_sums(x, w.group, S.data());
  const int32_t* gt = block_groups(w);
  for (int64_t nb = n0; nb < n1; nb += kRowBlock) {
    const int64_t ne = std::min(n1, nb + kRowBlock);
    int64_t t = 0;
    for (; t + 4 <= x.t; t += 4) {
      int64_t n = nb;
      for (; n + 2 <= ne; n += 2) q8_tile<2, 4, FOUR, ST>(x, w, gt, S.data(), bias, n, t, out, ldo);
      for (; n < ne; ++n) q8_tile<1, 4, FOUR, ST>(x, w, gt, S.data(), bias, n, t, out, ldo);
    }
    for (; t < x.t; ++t) {
      int64_t n = nb;
      for (; n + 4 <= ne; n += 4) q8_tile<4, 1, FOUR, ST>(x, w, gt, S.data(), bias, n, t, out, ldo);
      for (; n < ne; ++n) q8_tile<1, 1, FOUR, ST>(x, w, gt, S.data(), bias, n, t, out, ldo);
    }
  }
}

template <int NR, int NT, bool FOUR, ScaleType ST>
void f32_tile(const float* x, const QWeightView& w, const int32_t* gt, const float* bias, int64_t n, int64_t t, float* out,
              int64_t ldo) {
  const int64_t K = w.k, G = K / w.group, rb = qweight_row_bytes(w.bits, K), blocks = K / 32;
  const __m128i nib = _mm_set1_epi8(0x0F);
  __m256 a0[NR][NT], a1[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < NT; ++j) a0[r][j] = a1[r][j] = _mm256_setzero_ps();
  constexpr bool kF = ST == ScaleType::Factored;
  float fs_local[kF ? NR * kLocalGroups : 1], fo_local[kF ? NR * kLocalGroups : 1];
  const float* fs = kF ? expand_factored<NR>(w, 0, n, G, fs_local) : nullptr;
  const float* fo = kF && w.offset ? expand_factored<NR>(w, 1, n, G, fo_local) : nullptr;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t glo = gt[2 * b], ghi = gt[2 * b + 1];
    __m256 wv[NR][4];  // inputs 0..7, 8..15, 16..23, 24..31 of the block
    for (int r = 0; r < NR; ++r) {
      const uint8_t* row = w.packed + (n + r) * rb;
      __m128i lo, hi;  // 16 codes each as bytes
      if constexpr (FOUR) {
        const __m128i P = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + b * 16));
        lo = _mm_and_si128(P, nib);
        hi = _mm_and_si128(_mm_srli_epi16(P, 4), nib);
      } else {
        lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + b * 32));
        hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + b * 32 + 16));
      }
      const int64_t base = (n + r) * G;
      const __m256 sl = _mm256_set1_ps(kF ? fs[r * G + glo] : load1<ST>(w.scale, w.scale_d, base + glo));
      const __m256 sh = _mm256_set1_ps(kF ? fs[r * G + ghi] : load1<ST>(w.scale, w.scale_d, base + ghi));
      const __m256 ol = _mm256_set1_ps(kF ? (fo ? fo[r * G + glo] : -0.0f) : offset_or_zero<ST>(w, base + glo));
      const __m256 oh = _mm256_set1_ps(kF ? (fo ? fo[r * G + ghi] : -0.0f) : offset_or_zero<ST>(w, base + ghi));
      const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
      for (int p = 0; p < 4; ++p) {
        const __m256i c32 = FOUR ? _mm256_cvtepu8_epi32(parts[p]) : _mm256_cvtepi8_epi32(parts[p]);
        wv[r][p] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(c32), p < 2 ? sl : sh, p < 2 ? ol : oh);
      }
    }
    for (int j = 0; j < NT; ++j) {
      const float* xr = x + (t + j) * K + b * 32;
      const __m256 x0 = _mm256_loadu_ps(xr), x1 = _mm256_loadu_ps(xr + 8), x2 = _mm256_loadu_ps(xr + 16),
                   x3 = _mm256_loadu_ps(xr + 24);
      for (int r = 0; r < NR; ++r) {
        a0[r][j] = _mm256_fmadd_ps(x0, wv[r][0], a0[r][j]);
        a1[r][j] = _mm256_fmadd_ps(x2, wv[r][2], a1[r][j]);
        a0[r][j] = _mm256_fmadd_ps(x1, wv[r][1], a0[r][j]);
        a1[r][j] = _mm256_fmadd_ps(x3, wv[r][3], a1[r][j]);
      }
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < NT; ++j) {
      const float v = hsum8(_mm256_add_ps(a0[r][j], a1[r][j]));
      out[(t + j) * ldo + n + r] = bias ? v + bias[n + r] : v;
    }
}

template <bool FOUR, ScaleType ST>
void f32_rows(const float* x, int64_t T, const QWeightView& w, const float* bias, int64_t n0, int64_t n1, float* out,
              int64_t ldo) {
  const int32_t* gt = block_groups(w);
  for (int64_t nb = n0; nb < n1; nb += kRowBlock) {
    const int64_t ne = std::min(n1, nb + kRowBlock);
    int64_t t = 0;
    for (; t + 4 <= T; t += 4)
      for (int64_t n = nb; n < ne; ++n) f32_tile<1, 4, FOUR, ST>(x, w, gt, bias, n, t, out, ldo);
    for (; t < T; ++t) {
      int64_t n = nb;
      for (; n + 2 <= ne; n += 2) f32_tile<2, 1, FOUR, ST>(x, w, gt, bias, n, t, out, ldo);
      for (; n < ne; ++n) f32_tile<1, 1, FOUR, ST>(x, w, gt, bias, n, t, out, ldo);
    }
  }
}

}  // namespace

void qlinear_rows_q8_avx2(const QActivations& x, const QWeightView& w, const float* bias, int64_t n0, int64_t n1,
                          float* out, int64_t ldo) {
  if (w.layout == QLayout::RowLane16) return qlinear_rows_q8_rowlane_avx2(x, w, bias, n0, n1, out, ldo);
  KERNEL_CHECK(!w.codebook && w.narrow_base == kWideCodes) << "Rows layout given a codebook or narrow codes";
  with_scale_type(w.scale_type, [&](auto st) {
    w.bits == 4 ? q8_rows<true, st()>(x, w, bias, n0, n1, out, ldo) : q8_rows<false, st()>(x, w, bias, n0, n1, out, ldo);
  });
}

void qlinear_rows_f32_avx2(const float* x, int64_t T, const QWeightView& w, const float* bias, int64_t n0, int64_t n1,
                           float* out, int64_t ldo) {
  if (w.layout == QLayout::RowLane16) return qlinear_rows_f32_rowlane_avx2(x, T, w, bias, n0, n1, out, ldo);
  KERNEL_CHECK(!w.codebook && w.narrow_base == kWideCodes) << "Rows layout given a codebook or narrow codes";
  with_scale_type(w.scale_type, [&](auto st) {
    w.bits == 4 ? f32_rows<true, st()>(x, T, w, bias, n0, n1, out, ldo)
                : f32_rows<false, st()>(x, T, w, bias, n0, n1, out, ldo);
  });
}

namespace {
inline int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

inline float hmax_ps(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}
}  // namespace

// The scalar variant's arithmetic, eight at a time: the product x * id rounded to float, then to the
// nearest even integer (the scalar adds and subtracts 1.5 * 2^23, which rounds the same way), clamped
// to [-127, 127]; amax as a scalar from the same values, d = amax / 127 and id = 127 / amax (0 for
// amax 0) divided for eight blocks at once (each lane's quotient is the scalar one). Same bytes.
void quantize_act_blocks_avx2(const float* x, int64_t b0, int64_t b1, int8_t* q, float* scale, float* sum,
                              int32_t* half_sum) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f), k127 = _mm256_set1_ps(127.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);  // undoes the packs' lane interleave
  for (int64_t g0 = b0; g0 < b1; g0 += 8) {
    const int n = int(std::min<int64_t>(8, b1 - g0));
    alignas(32) float amax[8] = {}, d[8], id[8];
    for (int i = 0; i < n; ++i) {
      const float* xb = x + (g0 + i) * 32;
      __m256 m = _mm256_setzero_ps();
      for (int j = 0; j < 4; ++j)  // a NaN input is skipped, as in the scalar
        m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(xb + 8 * j), abs_mask), m);
      amax[i] = hmax_ps(m);
    }
    const __m256 a = _mm256_load_ps(amax);
    _mm256_store_ps(d, _mm256_div_ps(a, k127));
    _mm256_store_ps(id, _mm256_and_ps(_mm256_div_ps(k127, a), _mm256_cmp_ps(a, _mm256_setzero_ps(), _CMP_GT_OQ)));
    for (int i = 0; i < n; ++i) {
      const int64_t b = g0 + i;
      const float* xb = x + b * 32;
      const __m256 idv = _mm256_set1_ps(id[i]);
      __m256i c[4];
      for (int j = 0; j < 4; ++j) {
        const __m256 p = _mm256_mul_ps(_mm256_loadu_ps(xb + 8 * j), idv);
        const __m256 r = _mm256_round_ps(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        c[j] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi));
      }
      const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(c[0], c[1]), _mm256_packs_epi32(c[2], c[3]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * 32), _mm256_permutevar8x32_epi32(bytes, order));
      half_sum[b * 2] = hsum_epi32(_mm256_add_epi32(c[0], c[1]));
      half_sum[b * 2 + 1] = hsum_epi32(_mm256_add_epi32(c[2], c[3]));
      sum[b * 2] = d[i] * float(half_sum[b * 2]);
      sum[b * 2 + 1] = d[i] * float(half_sum[b * 2 + 1]);
      scale[b] = d[i];
    }
  }
}

}  // namespace llmctl::kernels::detail
