// AVX-512 (F, BW, VL, VNNI) variant of the qlinear kernels, chosen at run time.
//
// Int8 mode: vpdpbusd (u8 x s8 -> s32, four products a lane) over chunks of 4 blocks of 32 inputs:
//   the blocks' first halves (inputs 0..15 of each, [b0 | b1 | b2 | b3]) meet the activations' first
//   halves, their second halves the second halves, so int32 lane l holds part of block l / 4 (both
//   halves, or each half on its own when group == 16).
//   4 bits: the chunk's 64 code bytes: low nibbles are the first halves, high nibbles the second.
//   8 bits: the chunk's 128 code bytes, 16-byte quarters regrouped by one shuffle each way; codes
//           + 128 are unsigned, and 128 * sum(a) (one more vpdpbusd of the activations, once per
//           token) is subtracted: the lane sums stay exact. One conversion, scale multiply and FMA
//           per 128 inputs, as for 4 bits (a chunk of 64 took as many before).
//   Each lane's integer sum becomes f32 and is multiplied-added by (activation scale * weight
//   scale) of its block into one accumulator a (row, token); then the offsets' term offset[g] * S[g]
//   into the same lanes (16 groups a vector), a fixed horizontal sum, then bias.
// F32 mode: per block of 32, codes -> f32 -> scale * code + offset in registers, two accumulators
//   (inputs 0..15 and 16..31 of each block) per (row, token), summed at the end.
// The per-(row, token) instruction sequence is the same whichever row/token block it falls in, so
// results do not depend on T or on [n0, n1).
// GCC 12's AVX-512 headers fill don't-care lanes from _mm512_undefined_*(), which -Wuninitialized
// reports at every inlined use (false positives).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/cpu/qlinear_impl.h"
#include "kernels/kernel_check.h"

namespace llmctl::kernels::detail {

namespace {

constexpr int64_t kRowBlock = 16;  // weight rows kept in L1 while a group of tokens passes over them

// Per-call tables of the int8 mode, one entry per chunk (the same for every row and token).
struct alignas(64) LaneIdx {
  int32_t v[16];
};
struct ChunkTables {
  std::vector<LaneIdx> idx_lo, idx_hi;  // lane -> scale slot (0..7) from g_first
  std::vector<int64_t> g_first;
  std::vector<__mmask8> smask;     // scales that exist from g_first (at most 8)
  std::vector<__mmask64> wmask, amask0, amask1;
  std::vector<__mmask16> dmask;    // activation block scales present
};

ChunkTables build_tables(const QWeightView& w) {
  ChunkTables ct;
  const bool four = w.bits == 4;
  const int64_t K = w.k, G = K / w.group, CH = 128, C = (K + CH - 1) / CH;
  for (int64_t c = 0; c < C; ++c) {
    const int64_t k0 = c * CH, valid = std::min<int64_t>(CH, K - k0), g0 = k0 / w.group;
    LaneIdx lo, hi;
    for (int l = 0; l < 16; ++l) {
      const int64_t klo = k0 + (l / 4) * 32, khi = klo + 16;
      lo.v[l] = klo < K ? int32_t(klo / w.group - g0) : 0;
      hi.v[l] = khi < K ? int32_t(khi / w.group - g0) : 0;
    }
    ct.idx_lo.push_back(lo);
    ct.idx_hi.push_back(hi);
    ct.g_first.push_back(g0);
    ct.smask.push_back(__mmask8((1u << std::min<int64_t>(8, G - g0)) - 1));
    const int64_t wbytes = four ? valid / 2 : valid;
    ct.wmask.push_back(wbytes >= 64 ? ~__mmask64(0) : (__mmask64(1) << wbytes) - 1);
    const int64_t a0 = std::min<int64_t>(64, valid), a1 = valid - a0;
    ct.amask0.push_back(a0 >= 64 ? ~__mmask64(0) : (__mmask64(1) << a0) - 1);
    ct.amask1.push_back(a1 >= 64 ? ~__mmask64(0) : (__mmask64(1) << a1) - 1);
    ct.dmask.push_back(__mmask16((1u << (valid / 32)) - 1));
  }
  return ct;
}

// Horizontal sum in a fixed order (halves, then quarters, ...).
inline float hsum16(__m512 v) {
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v),
                                 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  const __m128 d = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(d, _mm_shuffle_ps(d, d, 1)));
}

// hsum16 of a, b, c and d (lanes 0..3), every sum formed from the same pairs in the same order:
// 256-bit halves, then 128-bit quarters, then elements 0 + 2 and 1 + 3, then those two.
inline __m128 hsum16x4(__m512 a, __m512 b, __m512 c, __m512 d) {
  const __m512 x = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));  // [a halves | b halves]
  const __m512 y = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 q = _mm512_add_ps(_mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(3, 1, 3, 1)));  // a, b, c, d quarters
  const __m512 e = _mm512_add_ps(q, _mm512_permute_ps(q, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 f = _mm512_add_ps(e, _mm512_permute_ps(e, _MM_SHUFFLE(1, 1, 1, 1)));
  return _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0), f));
}

// The tables depend on (bits, K, group) only: each thread keeps those of the shapes it has seen
// (a model has a handful), so decode does not rebuild them on every call.
const ChunkTables& tables_for(const QWeightView& w) {
  struct Entry {
    int bits;
    int64_t k;
    int group;
    ChunkTables ct;
  };
  thread_local std::vector<Entry> cache;
  for (const Entry& e : cache)
    if (e.bits == w.bits && e.k == w.k && e.group == w.group) return e.ct;
  if (cache.size() >= 16) cache.clear();
  cache.push_back({w.bits, w.k, w.group, build_tables(w)});
  return cache.back().ct;
}

// Up to 8 consecutive scales/offsets from p[i] as f32 in the low lanes.
template <bool F16>
inline __m512 load8(const void* p, int64_t i, __mmask8 m) {
  if constexpr (F16)
    return _mm512_zextps256_ps512(_mm256_cvtph_ps(_mm_maskz_loadu_epi16(m, static_cast<const uint16_t*>(p) + i)));
  else
    return _mm512_zextps256_ps512(_mm256_maskz_loadu_ps(m, static_cast<const float*>(p) + i));
}
template <bool F16>
inline __m512 load16(const void* p, int64_t i, __mmask16 m) {
  if constexpr (F16)
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(p) + i));
  else
    return _mm512_maskz_loadu_ps(m, static_cast<const float*>(p) + i);
}
template <bool F16>
inline float load1(const void* p, int64_t i) {
  if constexpr (F16)
    return _cvtsh_ss(static_cast<const uint16_t*>(p)[i]);
  else
    return static_cast<const float*>(p)[i];
}

// Offset i, or -0.0 where none are stored.
template <bool F16>
inline float offset_or_zero(const QWeightView& w, int64_t i) {
  return w.offset ? load1<F16>(w.offset, i) : -0.0f;
}

// a + offset[n, g] * S[t, g] for every group g, 16 groups a step (into a's lanes); a itself where no
// offsets are stored (every one -0).
template <bool F16>
inline __m512 add_offset_term(__m512 a, const void* offset, int64_t n, int64_t G, const float* S) {
  if (!offset) return a;
  for (int64_t g = 0; g < G; g += 16) {
    const __mmask16 m = G - g >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (G - g)) - 1);
    a = _mm512_fmadd_ps(load16<F16>(offset, n * G + g, m), _mm512_maskz_loadu_ps(m, S + g), a);
  }
  return a;
}

// The int8 activations rearranged once per call for the tiles: per (token, chunk of 128 inputs) one
// record, so the inner loop only loads it:
//   [first halves of the 4 blocks | second halves | block scale per lane (block l / 4)
//    | 8 bits: -128 * sum of the codes each lane meets in the first halves (int32) | in the second]
constexpr int64_t kRecord = 5 * 64;

void build_records(const QActivations& x, bool four, const ChunkTables& ct, uint8_t* rec) {
  const int64_t K = x.k, blocks = K / 32, C = int64_t(ct.g_first.size()), CH = 128;
  const __m512i didx = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  const __m512i bias80 = _mm512_set1_epi8(char(0x80)), zero = _mm512_setzero_si512();
  for (int64_t t = 0; t < x.t; ++t)
    for (int64_t c = 0; c < C; ++c) {
      uint8_t* r = rec + (t * C + c) * kRecord;
      const int8_t* q = x.q + t * K + c * CH;
      const __m512i A0 = _mm512_maskz_loadu_epi8(ct.amask0[c], q), A1 = _mm512_maskz_loadu_epi8(ct.amask1[c], q + 64);
      const __m512i lo = _mm512_shuffle_i64x2(A0, A1, _MM_SHUFFLE(2, 0, 2, 0));
      const __m512i hi = _mm512_shuffle_i64x2(A0, A1, _MM_SHUFFLE(3, 1, 3, 1));
      _mm512_store_si512(r, lo);
      _mm512_store_si512(r + 64, hi);
      _mm512_store_ps(r + 128, _mm512_permutexvar_ps(didx, _mm512_maskz_loadu_ps(ct.dmask[c], x.scale + t * blocks + c * (CH / 32))));
      if (!four) {
        _mm512_store_si512(r + 192, _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, bias80, lo)));
        _mm512_store_si512(r + 256, _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, bias80, hi)));
      }
    }
}

// The per-lane weight scales of rows [n, n + rows), every chunk, as the tiles use them: per (row, chunk)
// two vectors [scale of lane l's first half | of its second half] (equal unless group == 16). Built
// once per row block when several token tiles pass over it (prefill), so the tiles load them
// instead of converting and permuting f16 scales again for every group of 4 tokens; the values are
// the same either way.
constexpr int64_t kScaleRec = 2 * 16;  // floats per (row, chunk)

template <bool F16>
void expand_scales(const QWeightView& w, const ChunkTables& ct, int64_t n, int64_t rows, float* sx) {
  const int64_t G = w.k / w.group, C = int64_t(ct.g_first.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const __m512 s8 = load8<F16>(w.scale, (n + r) * G + ct.g_first[c], ct.smask[c]);
      float* o = sx + (r * C + c) * kScaleRec;
      _mm512_store_ps(o, _mm512_permutexvar_ps(_mm512_load_si512(ct.idx_lo[c].v), s8));
      _mm512_store_ps(o + 16, _mm512_permutexvar_ps(_mm512_load_si512(ct.idx_hi[c].v), s8));
    }
}

// NR rows from n x NT tokens from t, int8 activations. PRE: sx holds expand_scales of rows from n;
// otherwise the tile converts the scales itself.
template <int NR, int NT, bool FOUR, bool SPLIT, bool F16, bool PRE>
void q8_tile(const QWeightView& w, const ChunkTables& ct, const uint8_t* rec, const float* S, const float* bias,
             int64_t n, int64_t t, float* out, int64_t ldo, const float* sx) {
  const int64_t K = w.k, G = K / w.group, rb = qweight_row_bytes(w.bits, K);
  const int64_t C = int64_t(ct.g_first.size()), ahead = std::max<int64_t>(4, 6144 / rb);
  const __m512i nib = _mm512_set1_epi8(0x0F), bias80 = _mm512_set1_epi8(char(0x80));
  __m512 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < NT; ++j) acc[r][j] = _mm512_setzero_ps();
  for (int64_t c = 0; c < C; ++c) {
    __m512i wlo[NR], whi[NR];
    __m512 slo[NR], shi[NR];
    for (int r = 0; r < NR; ++r) {
      const uint8_t* row = w.packed + (n + r) * rb;
      // Decode streams the weights once: ask for the row about 6 KB ahead (the hardware prefetcher
      // alone leaves the loads waiting behind the arithmetic: int8 lm_head 2x slower without).
      if constexpr (FOUR) {
        if (NT == 1 && n + r + ahead < w.n) _mm_prefetch(reinterpret_cast<const char*>(row + ahead * rb + c * 64), _MM_HINT_T0);
        const __m512i W = _mm512_maskz_loadu_epi8(ct.wmask[c], row + c * 64);
        wlo[r] = _mm512_and_si512(W, nib);
        whi[r] = _mm512_and_si512(_mm512_srli_epi16(W, 4), nib);
      } else {  // 128 codes: blocks' first halves to wlo, second halves to whi, as unsigned codes + 128
        if (NT == 1 && n + r + ahead < w.n) {
          _mm_prefetch(reinterpret_cast<const char*>(row + ahead * rb + c * 128), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(row + ahead * rb + c * 128 + 64), _MM_HINT_T0);
        }
        const __m512i W0 = _mm512_maskz_loadu_epi8(ct.amask0[c], row + c * 128);
        const __m512i W1 = _mm512_maskz_loadu_epi8(ct.amask1[c], row + c * 128 + 64);
        wlo[r] = _mm512_xor_si512(_mm512_shuffle_i64x2(W0, W1, _MM_SHUFFLE(2, 0, 2, 0)), bias80);
        whi[r] = _mm512_xor_si512(_mm512_shuffle_i64x2(W0, W1, _MM_SHUFFLE(3, 1, 3, 1)), bias80);
      }
      if constexpr (PRE) {
        slo[r] = _mm512_load_ps(sx + (r * C + c) * kScaleRec);
        if constexpr (SPLIT) shi[r] = _mm512_load_ps(sx + (r * C + c) * kScaleRec + 16);
      } else {
        const __m512 s8 = load8<F16>(w.scale, (n + r) * G + ct.g_first[c], ct.smask[c]);
        slo[r] = _mm512_permutexvar_ps(_mm512_load_si512(ct.idx_lo[c].v), s8);
        if constexpr (SPLIT) shi[r] = _mm512_permutexvar_ps(_mm512_load_si512(ct.idx_hi[c].v), s8);
      }
    }
    for (int j = 0; j < NT; ++j) {
      const uint8_t* re = rec + ((t + j) * C + c) * kRecord;
      const __m512i a0 = _mm512_load_si512(re), a1 = _mm512_load_si512(re + 64);
      const __m512 d = _mm512_load_ps(reinterpret_cast<const float*>(re + 128));
      // 8 bits: the sums start from -128 * sum(a) a lane, taking back what the +128 on the codes adds
      __m512i c0 = _mm512_setzero_si512(), c1 = c0;
      if constexpr (!FOUR) {
        c0 = _mm512_load_si512(re + 192), c1 = _mm512_load_si512(re + 256);
        if constexpr (!SPLIT) c0 = _mm512_add_epi32(c0, c1);
      }
      for (int r = 0; r < NR; ++r) {
        if constexpr (SPLIT) {
          const __m512 fl = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(c0, wlo[r], a0));
          const __m512 fh = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(c1, whi[r], a1));
          acc[r][j] = _mm512_fmadd_ps(fl, _mm512_mul_ps(d, slo[r]), acc[r][j]);
          acc[r][j] = _mm512_fmadd_ps(fh, _mm512_mul_ps(d, shi[r]), acc[r][j]);
        } else {
          const __m512i is = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(c0, wlo[r], a0), whi[r], a1);
          acc[r][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is), _mm512_mul_ps(d, slo[r]), acc[r][j]);
        }
      }
    }
  }
  if constexpr (NR == 4 && NT == 1) {  // decode: four rows' sums at once, each in hsum16's order
    const float* St = S + t * G;
    __m128 s = hsum16x4(add_offset_term<F16>(acc[0][0], w.offset, n, G, St), add_offset_term<F16>(acc[1][0], w.offset, n + 1, G, St),
                        add_offset_term<F16>(acc[2][0], w.offset, n + 2, G, St), add_offset_term<F16>(acc[3][0], w.offset, n + 3, G, St));
    if (bias) s = _mm_add_ps(s, _mm_loadu_ps(bias + n));
    _mm_storeu_ps(out + t * ldo + n, s);
    return;
  }
  for (int r = 0; r < NR; ++r) {
    if constexpr (NT == 4) {  // four horizontal sums at once, each in hsum16's order
      alignas(16) float s[4];
      _mm_store_ps(s, hsum16x4(add_offset_term<F16>(acc[r][0], w.offset, n + r, G, S + t * G),
                               add_offset_term<F16>(acc[r][1], w.offset, n + r, G, S + (t + 1) * G),
                               add_offset_term<F16>(acc[r][2], w.offset, n + r, G, S + (t + 2) * G),
                               add_offset_term<F16>(acc[r][3], w.offset, n + r, G, S + (t + 3) * G)));
      for (int j = 0; j < 4; ++j) out[(t + j) * ldo + n + r] = bias ? s[j] + bias[n + r] : s[j];
    } else {
      for (int j = 0; j < NT; ++j) {
        const float s = hsum16(add_offset_term<F16>(acc[r][j], w.offset, n + r, G, S + (t + j) * G));
        out[(t + j) * ldo + n + r] = bias ? s + bias[n + r] : s;
      }
    }
  }
}

template <int V>
using I = std::integral_constant<int, V>;

template <bool FOUR, bool SPLIT, bool F16>
void q8_rows(const QActivations& x, const QWeightView& w, const float* bias, int64_t n0, int64_t n1, float* out,
             int64_t ldo) {
  const ChunkTables& ct = tables_for(w);
  const int64_t G = w.k / w.group, C = int64_t(ct.g_first.size());
  thread_local std::vector<float> S;
  S.resize(static_cast<size_t>(x.t * G));
  qact_group_sums(x, w.group, S.data());
  thread_local std::vector<uint8_t> rec_buf;
  rec_buf.resize(size_t(x.t * C * kRecord + 64));
  uint8_t* rec = rec_buf.data() + (64 - reinterpret_cast<uintptr_t>(rec_buf.data()) % 64) % 64;
  build_records(x, FOUR, ct, rec);
  constexpr int64_t kRows = 24;  // row block: a multiple of the 4-row tiles
  const bool expand = x.t >= 4;  // several token tiles per row block: expand its scales once
  thread_local std::vector<float> sx_buf;
  float* sx = nullptr;
  if (expand) {
    sx_buf.resize(size_t(kRows * C * kScaleRec + 16));
    sx = sx_buf.data() + (16 - reinterpret_cast<uintptr_t>(sx_buf.data()) / 4 % 16) % 16;
  }
  for (int64_t nb = n0; nb < n1; nb += kRows) {
    const int64_t ne = std::min(n1, nb + kRows);
    if (expand) expand_scales<F16>(w, ct, nb, ne - nb, sx);
    auto tile = [&](auto nr, auto nt, int64_t n, int64_t t) {
      if (expand)
        q8_tile<nr(), nt(), FOUR, SPLIT, F16, true>(w, ct, rec, S.data(), bias, n, t, out, ldo, sx + (n - nb) * C * kScaleRec);
      else
        q8_tile<nr(), nt(), FOUR, SPLIT, F16, false>(w, ct, rec, S.data(), bias, n, t, out, ldo, nullptr);
    };
    int64_t t = 0;
    for (; t + 4 <= x.t; t += 4) {
      int64_t n = nb;
      for (; n + 4 <= ne; n += 4) tile(I<4>{}, I<4>{}, n, t);
      for (; n < ne; ++n) tile(I<1>{}, I<4>{}, n, t);
    }
    for (; t < x.t; ++t) {
      int64_t n = nb;
      for (; n + 4 <= ne; n += 4) tile(I<4>{}, I<1>{}, n, t);
      for (; n < ne; ++n) tile(I<1>{}, I<1>{}, n, t);
    }
  }
}

// F32 mode: NR rows x NT tokens, weights dequantized in registers once per block for all NT tokens.
template <int NR, int NT, bool FOUR, bool F16>
void f32_tile(const float* x, const QWeightView& w, const float* bias, int64_t n, int64_t t, float* out, int64_t ldo) {
  const int64_t K = w.k, G = K / w.group, rb = qweight_row_bytes(w.bits, K), blocks = K / 32;
  const __m128i nib = _mm_set1_epi8(0x0F);
  __m512 a0[NR][NT], a1[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < NT; ++j) a0[r][j] = a1[r][j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t glo = (b * 32) / w.group, ghi = (b * 32 + 16) / w.group;
    __m512 wlo[NR], whi[NR];
    for (int r = 0; r < NR; ++r) {
      const uint8_t* row = w.packed + (n + r) * rb;
      __m512 clo, chi;
      if constexpr (FOUR) {
        const __m128i P = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + b * 16));
        clo = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(P, nib)));
        chi = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(P, 4), nib)));
      } else {
        clo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + b * 32))));
        chi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + b * 32 + 16))));
      }
      const int64_t base = (n + r) * G;
      const __m512 sl = _mm512_set1_ps(load1<F16>(w.scale, base + glo)), ol = _mm512_set1_ps(offset_or_zero<F16>(w, base + glo));
      wlo[r] = _mm512_fmadd_ps(clo, sl, ol);
      if (glo == ghi)  // groups of 32 or more: one scale for the block
        whi[r] = _mm512_fmadd_ps(chi, sl, ol);
      else
        whi[r] = _mm512_fmadd_ps(chi, _mm512_set1_ps(load1<F16>(w.scale, base + ghi)), _mm512_set1_ps(offset_or_zero<F16>(w, base + ghi)));
    }
    for (int j = 0; j < NT; ++j) {
      const float* xr = x + (t + j) * K + b * 32;
      const __m512 xlo = _mm512_loadu_ps(xr), xhi = _mm512_loadu_ps(xr + 16);
      for (int r = 0; r < NR; ++r) {
        a0[r][j] = _mm512_fmadd_ps(xlo, wlo[r], a0[r][j]);
        a1[r][j] = _mm512_fmadd_ps(xhi, whi[r], a1[r][j]);
      }
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int j = 0; j < NT; ++j) {
      const float s = hsum16(_mm512_add_ps(a0[r][j], a1[r][j]));
      out[(t + j) * ldo + n + r] = bias ? s + bias[n + r] : s;
    }
}

template <bool FOUR, bool F16>
void f32_rows(const float* x, int64_t T, const QWeightView& w, const float* bias, int64_t n0, int64_t n1, float* out,
              int64_t ldo) {
  for (int64_t nb = n0; nb < n1; nb += kRowBlock) {
    const int64_t ne = std::min(n1, nb + kRowBlock);
    int64_t t = 0;
    for (; t + 4 <= T; t += 4) {
      int64_t n = nb;
      for (; n + 2 <= ne; n += 2) f32_tile<2, 4, FOUR, F16>(x, w, bias, n, t, out, ldo);
      for (; n < ne; ++n) f32_tile<1, 4, FOUR, F16>(x, w, bias, n, t, out, ldo);
    }
    for (; t < T; ++t) {
      int64_t n = nb;
      for (; n + 4 <= ne; n += 4) f32_tile<4, 1, FOUR, F16>(x, w, bias, n, t, out, ldo);
      for (; n < ne; ++n) f32_tile<1, 1, FOUR, F16>(x, w, bias, n, t, out, ldo);
    }
  }
}

}  // namespace

void qlinear_rows_q8_avx512(const QActivations& x, const QWeightView& w, const float* bias, int64_t n0, int64_t n1,
                            float* out, int64_t ldo) {
  if (w.layout == QLayout::RowLane16) return qlinear_rows_q8_rowlane_avx512(x, w, bias, n0, n1, out, ldo);
  KERNEL_CHECK(!w.codebook && w.narrow_base == kWideCodes) << "Rows layout given a codebook or narrow codes";
  KERNEL_CHECK(w.scale_type != ScaleType::Factored) << "the AVX-512 Rows kernels take no factored scales (qweight_factored_ok)";
  const bool f16 = w.scale_type == ScaleType::F16;
  if (w.bits == 4 && w.group == 16) {
    f16 ? q8_rows<true, true, true>(x, w, bias, n0, n1, out, ldo) : q8_rows<true, true, false>(x, w, bias, n0, n1, out, ldo);
  } else if (w.bits == 4) {
    f16 ? q8_rows<true, false, true>(x, w, bias, n0, n1, out, ldo) : q8_rows<true, false, false>(x, w, bias, n0, n1, out, ldo);
  } else if (w.group == 16) {
    f16 ? q8_rows<false, true, true>(x, w, bias, n0, n1, out, ldo) : q8_rows<false, true, false>(x, w, bias, n0, n1, out, ldo);
  } else {
    f16 ? q8_rows<false, false, true>(x, w, bias, n0, n1, out, ldo) : q8_rows<false, false, false>(x, w, bias, n0, n1, out, ldo);
  }
}

void qlinear_rows_f32_avx512(const float* x, int64_t T, const QWeightView& w, const float* bias, int64_t n0, int64_t n1,
                             float* out, int64_t ldo) {
  if (w.layout == QLayout::RowLane16) return qlinear_rows_f32_rowlane_avx512(x, T, w, bias, n0, n1, out, ldo);
  KERNEL_CHECK(!w.codebook && w.narrow_base == kWideCodes) << "Rows layout given a codebook or narrow codes";
  KERNEL_CHECK(w.scale_type != ScaleType::Factored) << "the AVX-512 Rows kernels take no factored scales (qweight_factored_ok)";
  const bool f16 = w.scale_type == ScaleType::F16;
  if (w.bits == 4)
    f16 ? f32_rows<true, true>(x, T, w, bias, n0, n1, out, ldo) : f32_rows<true, false>(x, T, w, bias, n0, n1, out, ldo);
  else
    f16 ? f32_rows<false, true>(x, T, w, bias, n0, n1, out, ldo) : f32_rows<false, false>(x, T, w, bias, n0, n1, out, ldo);
}

}  // namespace llmctl::kernels::detail
