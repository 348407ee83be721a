// AVX-512 variant of paged_attention_head (attention.cpp picks it first), head_dim a multiple of 16
// up to 128 or 256, in attention.h's order bit for bit, over an f32 cache or, dequantizing each row in
// registers, an int8 / fp8 one (a query's own block then optionally from exact f32 rows: the keys
// go in two segments, KeyRows):
//   scores: 16 keys at a time, one 16-lane vector per key (lane l: its fma chain over d % 16 == l),
//           reduced together by unpack / shuffle additions whose tree is tree16's, so lane j of the
//           result is key j's score;
//   softmax: attention_exp 16 lanes at a time (the same operations), the 16 double partial sums as
//           two 8-lane vectors;
//   p @ V:  lanes are d; the even and odd keys' chains in separate accumulators (2 x D / 16).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/cpu/attention_impl.h"

namespace llmctl::kernels::detail {

namespace {

// attention_exp on 16 lanes (see attention_impl.h); lanes of x <= 0.
inline __m512 exp16(__m512 x) {
  using C = ExpConstants;
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  const __mmask16 low = _mm512_cmp_ps_mask(x, _mm512_set1_ps(C::kMin), _CMP_LT_OQ);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(C::kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-C::kLn2Hi), x);
  r = _mm512_fmadd_ps(n, _mm512_set1_ps(-C::kLn2Lo), r);
  __m512 p = _mm512_set1_ps(C::kPoly[0]);
  for (int i = 1; i < 8; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(C::kPoly[i]));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  __m512 y = _mm512_mul_ps(p, _mm512_castsi512_ps(e));
  y = _mm512_mask_mov_ps(y, low, _mm512_setzero_ps());
  return _mm512_mask_mov_ps(y, nan, x);
}

// v[j] = key j's 16 lane sums -> one vector, lane j = tree16(v[j]).
inline __m512 reduce16(const __m512* v) {
  __m512 w[8], x[4];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i)  // per 128-bit lane: (a0 + a2), (a1 + a3) of keys 2i, 2i + 1
    w[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {  // per 128-bit lane L: P_L of keys 4i..4i+3
    const __m512d a = _mm512_castps_pd(w[2 * i]), b = _mm512_castps_pd(w[2 * i + 1]);
    x[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  const __m512 s01 = _mm512_add_ps(_mm512_shuffle_f32x4(x[0], x[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_f32x4(x[0], x[1], _MM_SHUFFLE(3, 1, 3, 1)));  // P0 + P1, P2 + P3
  const __m512 s23 = _mm512_add_ps(_mm512_shuffle_f32x4(x[2], x[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_f32x4(x[2], x[3], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(s01, s23, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(s01, s23, _MM_SHUFFLE(3, 1, 3, 1)));
}

// Cache rows, one loader per layout: next() gives key / value j's row in order, and a row's load(i)
// its elements 16i..16i+15 as f32.
struct F32Rows {
  KvRowCursor cursor;
  struct Row {
    const float* p;
    __m512 load(int i) const { return _mm512_loadu_ps(p + 16 * i); }
  };
  Row next() { return {cursor.next()}; }
};

// int8 codes with a (scale, zero) per slot and head: float(q + 128) * scale + zero, the product
// rounded before the sum as dequantize_kv_row_int8 does (kept from fusing into an FMA).
struct Int8Rows {
  KvSlotCursor slots;
  const int8_t* codes;
  const float* scale_zero;
  int64_t heads, kvh, D;
  struct Row {
    const int8_t* p;
    __m512 s, z;
    __m512 load(int i) const {
      const __m512i c = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * i)));
      __m512 prod = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(c, _mm512_set1_epi32(128))), s);
      asm("" : "+v"(prod));
      return _mm512_add_ps(prod, z);
    }
  };
  Row next() {
    const int64_t at = slots.next() * heads + kvh;
    return {codes + at * D, _mm512_set1_ps(scale_zero[2 * at]), _mm512_set1_ps(scale_zero[2 * at + 1])};
  }
};

// e4m3 codes with one scale per head: fp8_e4m3_to_f32(q) * scale for every code the quantizer
// writes (all but the two NaN codes). A code's exponent and mantissa bits, moved into an f32's and
// rebiased (+120), are its value exactly; a subnormal code (exponent 0, value m * 2^-9) is built as
// 2^-6 * (1 + m / 8) and 2^-6 taken off, exactly. (Building it as an f32 subnormal and scaling
// would be exact too, but arithmetic on subnormals is many times slower.) The magnitude times the
// scale is rounded once, as the table's product; the code's sign is then xor-ed in.
struct Fp8Rows {
  KvSlotCursor slots;
  const uint8_t* codes;
  __m512 s;
  int64_t heads, kvh, D;
  struct Row {
    const uint8_t* p;
    __m512 s;
    __m512 load(int i) const {
      const __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * i)));
      const __m512i em = _mm512_and_si512(c, _mm512_set1_epi32(0x7f));
      const __mmask16 sub = _mm512_cmplt_epi32_mask(em, _mm512_set1_epi32(8));  // exponent 0
      __m512i bits = _mm512_add_epi32(_mm512_slli_epi32(em, 20), _mm512_set1_epi32(120 << 23));
      bits = _mm512_mask_add_epi32(bits, sub, bits, _mm512_set1_epi32(1 << 23));
      __m512 mag = _mm512_castsi512_ps(bits);
      mag = _mm512_mask_sub_ps(mag, sub, mag, _mm512_set1_ps(0x1p-6f));
      const __m512i v = _mm512_castps_si512(_mm512_mul_ps(mag, s));
      // v ^ (c << 24 & bit 31): the truth table of a ^ (b & c) is 0x78
      const __m512i sign_moved = _mm512_slli_epi32(c, 24);
      return _mm512_castsi512_ps(_mm512_ternarylogic_epi32(v, sign_moved, _mm512_set1_epi32(INT32_MIN), 0x78));
    }
  };
  Row next() { return {codes + (slots.next() * heads + kvh) * D, s}; }
};

// Exact f32 rows in a run (attention.h: KvExactRows), from a given key on.
using LinearRows = LinearRowsOf<F32Rows::Row>;

// Scores of the next `keys` keys (<= 16; the rest 0) into one vector, lane j = key j. Inlined with
// keys = 16 for every group but the last, so the 16 chains stay in registers.
template <int C, class Rows>
__attribute__((always_inline)) inline __m512 scores16(const __m512* qv, Rows& rows, int keys) {
  __m512 a[16];
#pragma GCC unroll 16
  for (int kk = 0; kk < 16; ++kk) {
    a[kk] = _mm512_setzero_ps();
    if (kk >= keys) continue;
    const auto kr = rows.next();
#pragma GCC unroll 8
    for (int i = 0; i < C; ++i) a[kk] = _mm512_fmadd_ps(qv[i], kr.load(i), a[kk]);
  }
  return reduce16(a);
}

// Scores of keys [j, n) of one query (krows positioned at key j) into scores[j..], 16 at a time
// (writing up to 15 past n); returns their maximum (-inf for none).
template <int C, class Rows>
float score_keys(const __m512* qv, Rows& krows, int32_t j, int32_t n, float scale, float* scores) {
  __m512 vmax = _mm512_set1_ps(-INFINITY);
  for (; j < n; j += 16) {
    const int keys = std::min<int32_t>(16, n - j);
    __m512 s = keys == 16 ? scores16<C>(qv, krows, 16) : scores16<C>(qv, krows, keys);
    const __mmask16 live = __mmask16((1u << keys) - 1);
    s = _mm512_mul_ps(s, _mm512_set1_ps(scale));
    _mm512_storeu_ps(scores + j, s);
    vmax = _mm512_mask_max_ps(vmax, live, vmax, s);
  }
  return _mm512_reduce_max_ps(vmax);
}

// scores[0, n) -> e^(score - m) in place (zeros to the next multiple of 16); returns 1 / their sum.
inline float softmax_in_place(float* scores, int32_t n, float m) {
  __m512d part_lo = _mm512_setzero_pd(), part_hi = _mm512_setzero_pd();  // partials 0..7, 8..15
  for (int32_t j0 = 0; j0 < n; j0 += 16) {
    const __mmask16 live = __mmask16((1u << std::min<int32_t>(16, n - j0)) - 1);
    const __m512 e = _mm512_maskz_mov_ps(live, exp16(_mm512_sub_ps(_mm512_loadu_ps(scores + j0), _mm512_set1_ps(m))));
    _mm512_storeu_ps(scores + j0, e);
    part_lo = _mm512_add_pd(part_lo, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    part_hi = _mm512_add_pd(part_hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
  }
  alignas(64) double part[16];
  _mm512_store_pd(part, part_lo);
  _mm512_store_pd(part + 8, part_hi);
  return float(1.0 / tree16(part));
}

// P @ V of one query over keys [j, n) (vrows positioned at key j), continuing its even / odd chains;
// the C vectors of columns from vector O on.
template <int C, int O = 0, class Rows>
void add_values(__m512 (&acc)[2][C], Rows& vrows, int32_t j, int32_t n, const float* e, float inv) {
  for (; j < n; ++j) {
    const __m512 p = _mm512_set1_ps(e[j] * inv);
    const auto vr = vrows.next();
    __m512* a = acc[j % 2];
    for (int i = 0; i < C; ++i) a[i] = _mm512_fmadd_ps(p, vr.load(O + i), a[i]);
  }
}

template <int C, int O = 0>
void store_out(const __m512 (&acc)[2][C], float* out) {
  for (int i = 0; i < C; ++i) _mm512_storeu_ps(out + 16 * (O + i), _mm512_add_ps(acc[0][i], acc[1][i]));
}

// P @ V of one query over keys [j, n) (vrows positioned at key j), two keys a step where the
// chains' parity is known at compile time; the C vectors of columns from vector O on.
template <int C, int O = 0, class Rows>
void add_value_pairs(__m512 (&acc)[2][C], Rows& vrows, int32_t j, int32_t n, const float* e, float inv) {
  if (j < n && j % 2) add_values<C, O>(acc, vrows, j, j + 1, e, inv), ++j;
  for (; j + 1 < n; j += 2) {
    const __m512 p0 = _mm512_set1_ps(e[j] * inv), p1 = _mm512_set1_ps(e[j + 1] * inv);
    const auto v0 = vrows.next();
    for (int i = 0; i < C; ++i) acc[0][i] = _mm512_fmadd_ps(p0, v0.load(O + i), acc[0][i]);
    const auto v1 = vrows.next();
    for (int i = 0; i < C; ++i) acc[1][i] = _mm512_fmadd_ps(p1, v1.load(O + i), acc[1][i]);
  }
  add_values<C, O>(acc, vrows, j, n, e, inv);  // a last even key
}

// A query's keys: the cache's up to `from`, then the exact rows (attention_impl.h).
template <class Rows>
using KeyRows = KeyRowsOf<Rows, LinearRows>;

template <int C, class Rows>  // C = head_dim / 16; softcap > 0: soft-capped scores; mask: a window's
void attention_head(const float* q, KeyRows<Rows> kr, int32_t position, float scale, float* scores, float* out,
                    float softcap = 0.0f, int32_t mask = 0) {
  const int32_t n = position + 1, from = std::min(kr.from, n);
  __m512 qv[C];
  for (int i = 0; i < C; ++i) qv[i] = _mm512_loadu_ps(q + 16 * i);
  float m = std::max(score_keys<C>(qv, kr.krows, 0, from, scale, scores),
                     score_keys<C>(qv, kr.kx, from, n, scale, scores));
  m = cap_and_mask(scores, n, m, softcap, mask);
  const float inv = softmax_in_place(scores, n, m);
  // P @ V over slices of at most 8 vectors of columns (16 chains; columns' chains are independent,
  // so slicing changes no bits): one slice up to head_dim 128, two at 256
  auto values = [&](auto width, auto offset) {
    constexpr int W = width(), O = offset();
    __m512 acc[2][W];
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < W; ++i) acc[h][i] = _mm512_setzero_ps();
    Rows vrows = kr.vrows;
    LinearRows vx = kr.vx;
    add_value_pairs<W, O>(acc, vrows, 0, from, scores, inv);
    add_value_pairs<W, O>(acc, vx, from, n, scores, inv);
    store_out<W, O>(acc, out);
  };
  using std::integral_constant;
  values(integral_constant<int, std::min(C, 8)>{}, integral_constant<int, 0>{});
  if constexpr (C > 8) values(integral_constant<int, C - 8>{}, integral_constant<int, 8>{});
}

// Keys a block of the tiles holds: their f32 rows (dequantized from int8 / fp8) laid one after
// another, 16 KB, in L1 (64 keys at head_dim 64, 32 at 128) while every tile passes over them, so a
// row is read from the cache (and dequantized) once per call, not once per tile, pair of queries and
// slice. (Read in place, a paged cache's rows of one kv head are a slot apart, 4 KB for 8 kv heads
// x 128: they evict each other from L1.) A multiple of 4: the tiles' shared keys go in groups of 4.
template <int C>
constexpr int32_t kKeyBlock = 4096 / (16 * C) / 4 * 4;

// The tiles' value passes take slices of at most kSlice vectors of columns: a pair of queries' chains
// (2 queries x 2 key parities) then fill 16 registers.
constexpr int kSlice = 4;

// One pass of a pair of queries (t0, t0 + 1) over keys [j, end) (both even) of `rows` (positioned at
// key j), the slice of W <= kSlice vectors from vector O, continuing the pair's chains
// acc[query][key parity][0, W): each row's slice loaded once for the two.
template <int W, int O, class Rows>
void pair_values(__m512 (&acc)[2][2][kSlice], Rows& rows, int32_t j, int32_t end, int t0, float* const* scores,
                 const float* inv) {
  __m512 a[2][2][W];  // in registers for the loop
  for (int t = 0; t < 2; ++t)
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < W; ++i) a[t][h][i] = acc[t][h][i];
  for (; j < end; j += 2)
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const auto row = rows.next();
      const __m512 p0 = _mm512_set1_ps(scores[t0][j + h] * inv[t0]);
      const __m512 p1 = _mm512_set1_ps(scores[t0 + 1][j + h] * inv[t0 + 1]);
      for (int i = 0; i < W; ++i) {
        const __m512 v = row.load(O + i);
        a[0][h][i] = _mm512_fmadd_ps(p0, v, a[0][h][i]);
        a[1][h][i] = _mm512_fmadd_ps(p1, v, a[1][h][i]);
      }
    }
  for (int t = 0; t < 2; ++t)
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < W; ++i) acc[t][h][i] = a[t][h][i];
}

// The end of a query's slice after the shared keys: its own keys [shared, n), the cache's (`after`
// positioned at key `shared`) before `from`, exact ones from it; then even + odd chains to out.
template <int W, int O, class Rows>
void finish_values(const __m512 (&chains)[2][kSlice], const KeyRows<Rows>& kr, const Rows& after, int32_t from,
                   int32_t shared, int32_t n, const float* e, float inv, float* out) {
  __m512 acc[2][W];
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < W; ++i) acc[h][i] = chains[h][i];
  const int32_t cut = std::clamp(from, shared, n);
  if (shared < cut) {
    Rows tail = after;
    add_values<W, O>(acc, tail, shared, cut, e, inv);
  }
  if (cut < n) {
    LinearRows tail = kr.vx_at(cut);
    add_values<W, O>(acc, tail, cut, n, e, inv);
  }
  store_out<W, O>(acc, out);
}

// Rows [j0, j1) as f32 into buf (row j at (j - j0) * 16C): the cache's (`cache`, at key j0) up to
// `from`, then exact ones (`exact`, at key max(j0, from)); both loaders left at j1.
template <int C, class Rows>
void load_block(Rows& cache, LinearRows& exact, int32_t from, int32_t j0, int32_t j1, float* buf) {
  auto copy = [&](auto& src, int32_t a, int32_t b) {
    for (int32_t j = a; j < b; ++j) {
      const auto r = src.next();
      for (int i = 0; i < C; ++i) _mm512_store_ps(buf + (j - j0) * 16 * C + 16 * i, r.load(i));
    }
  };
  const int32_t cut = std::clamp(from, j0, j1);
  copy(cache, j0, cut);
  copy(exact, cut, j1);
}

// Scores of one tile's four queries q[0..3] for keys [j0, j1) (multiples of 4; rows at key j0), 16
// (query, key) pairs a step, lane 4t + k = query t, key j + k; their maxima into vmax.
template <int C, class Rows>
void tile_scores(const float* const* q, Rows rows, int32_t j0, int32_t j1, float scale, float* const* scores,
                 __m512& vmax) {
  for (int32_t j = j0; j < j1; j += 4) {
    __m512 a[16];
    for (int i = 0; i < 16; ++i) a[i] = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const auto row = rows.next();
#pragma GCC unroll 8
      for (int i = 0; i < C; ++i) {
        const __m512 kv = row.load(i);
#pragma GCC unroll 4
        for (int t = 0; t < 4; ++t) a[4 * t + k] = _mm512_fmadd_ps(_mm512_loadu_ps(q[t] + 16 * i), kv, a[4 * t + k]);
      }
    }
    const __m512 s = _mm512_mul_ps(reduce16(a), _mm512_set1_ps(scale));
    _mm_storeu_ps(scores[0] + j, _mm512_extractf32x4_ps(s, 0));
    _mm_storeu_ps(scores[1] + j, _mm512_extractf32x4_ps(s, 1));
    _mm_storeu_ps(scores[2] + j, _mm512_extractf32x4_ps(s, 2));
    _mm_storeu_ps(scores[3] + j, _mm512_extractf32x4_ps(s, 3));
    vmax = _mm512_max_ps(vmax, s);
  }
}

// `tiles` tiles of four query tokens at ascending positions (tile t: q[4t..4t+3]) reading one kv
// head: the results of attention_head for each query, bit for bit (every (query, key) product and sum
// is the same operation in the same order). Tile t's keys [0, shared_t), shared_t = (its first
// position + 1) rounded down to 4, are read a block at a time (kKeyBlock keys' rows in L1) by every
// tile that reads them: key rows loaded once per block for a tile's four queries, value rows once per
// pair of queries and slice of at most 4 vectors of columns (whose chains fill 16 registers; chains
// of columns are independent, so slicing changes no bits); each pass's chains are carried from block
// to block, so each query adds its keys in order. Each query's other keys [shared_t, position] alone.
// Exact rows (kr.from < INT32_MAX) start at a multiple of 4 no later than any tile's first query;
// tile t reads them from froms[t] (null: kr.from; a multiple of 4 in [kr.from, its first query]), the
// cache's rows before. A tile whose from is past kr.from shares only keys before kr.from (the blocks
// hold exact rows from there); its keys from there on go alone, the cache's then the exact ones.
// rows_at(j): the KeyRows with the cache's loaders at key j. softcap > 0: each query's scores
// soft-capped as attention_head's; masks (null: none) each query's window mask, as attention_head's.
template <int C, class Rows, class RowsAt>
void attention_tiles(int tiles, const float* const* q, const int32_t* positions, const KeyRows<Rows>& kr,
                     RowsAt&& rows_at, float scale, float* const* scores, float* const* out, float softcap,
                     const int32_t* masks, const int32_t* froms) {
  constexpr int32_t kBlock = kKeyBlock<C>;
  constexpr int kSlices = (C + kSlice - 1) / kSlice;  // of columns, for the value passes
  const int queries = 4 * tiles;
  int32_t n[4 * kPagedAttentionMaxTiles], shared[kPagedAttentionMaxTiles], tfrom[kPagedAttentionMaxTiles], all = 0;
  for (int i = 0; i < queries; ++i) n[i] = positions[i] + 1;
  for (int t = 0; t < tiles; ++t) {
    tfrom[t] = froms ? froms[t] : kr.from;
    shared[t] = n[4 * t] / 4 * 4;
    if (tfrom[t] > kr.from) shared[t] = std::min(shared[t], kr.from);
    all = std::max(all, shared[t]);
  }
  const int32_t from = std::min(kr.from, all);
  alignas(64) float rows[kBlock * 16 * C];
  auto blocks = [&](Rows cache, LinearRows exact, auto&& pass) {  // pass(tile, j0, end) over each block
    for (int32_t j0 = 0; j0 < all; j0 += kBlock) {
      const int32_t j1 = std::min(all, j0 + kBlock);
      load_block<C>(cache, exact, from, j0, j1, rows);
      for (int t = 0; t < tiles; ++t)
        if (shared[t] > j0) pass(t, j0, std::min(j1, shared[t]));
    }
  };
  const LinearRows exact_from = from < all ? kr.kx_at(from) : LinearRows{nullptr, 0};
  __m512 vmax[kPagedAttentionMaxTiles];
  for (int t = 0; t < tiles; ++t) vmax[t] = _mm512_set1_ps(-INFINITY);
  blocks(kr.krows, exact_from, [&](int t, int32_t j0, int32_t end) {
    tile_scores<C>(q + 4 * t, LinearRows{rows, 16 * C}, j0, end, scale, scores + 4 * t, vmax[t]);
  });
  float inv[4 * kPagedAttentionMaxTiles];
  for (int i = 0; i < queries; ++i) {  // each query's other keys alone, then its softmax
    const int t = i / 4;
    __m512 qv[C];
    for (int c = 0; c < C; ++c) qv[c] = _mm512_loadu_ps(q[i] + 16 * c);
    float m = -INFINITY;
    const int32_t cut = std::clamp(tfrom[t], shared[t], n[i]);  // the cache's keys, then exact ones
    if (shared[t] < cut) {
      Rows rest = rows_at(shared[t]).krows;
      m = score_keys<C>(qv, rest, shared[t], cut, scale, scores[i]);
    }
    if (cut < n[i]) {
      LinearRows rest = kr.kx_at(cut);
      m = std::max(m, score_keys<C>(qv, rest, cut, n[i], scale, scores[i]));
    }
    alignas(64) float lane_max[16];
    _mm512_store_ps(lane_max, vmax[t]);
    for (int k = 0; k < 4; ++k) m = std::max(m, lane_max[4 * (i % 4) + k]);
    m = cap_and_mask(scores[i], n[i], m, softcap, masks ? masks[i] : 0);
    inv[i] = softmax_in_place(scores[i], n[i], m);
  }
  // [tile][slice][query pair][query of the pair][key parity][vector]
  __m512 carry[kPagedAttentionMaxTiles][kSlices][2][2][2][kSlice];
  for (int t = 0; t < tiles; ++t) std::fill_n(&carry[t][0][0][0][0][0], kSlices * 8 * kSlice, _mm512_setzero_ps());
  // fn(W, O, s) for each slice s of W vectors from vector O, as compile-time constants
  auto each_slice = [](auto&& fn) {
    [&]<int... S>(std::integer_sequence<int, S...>) {
      (fn(std::integral_constant<int, std::min(kSlice, C - kSlice * S)>{}, std::integral_constant<int, kSlice * S>{},
          S),
       ...);
    }(std::make_integer_sequence<int, kSlices>{});
  };
  const LinearRows exact_values = from < all ? kr.vx_at(from) : LinearRows{nullptr, 0};
  blocks(kr.vrows, exact_values, [&](int t, int32_t j0, int32_t end) {
    for (int pair = 0; pair < 2; ++pair)
      each_slice([&](auto W, auto O, int sl) {
        LinearRows block{rows, 16 * C};
        pair_values<W(), O()>(carry[t][sl][pair], block, j0, end, 2 * pair, scores + 4 * t, inv + 4 * t);
      });
  });
  for (int i = 0; i < queries; ++i) {
    const int t = i / 4;
    const Rows after = rows_at(shared[t]).vrows;
    each_slice([&](auto W, auto O, int sl) {
      finish_values<W(), O()>(carry[t][sl][i % 4 / 2][i % 2], kr, after, tfrom[t], shared[t], n[i], scores[i], inv[i],
                              out[i]);
    });
  }
}

// fn(std::integral_constant<int, head_dim / 16>) for the head sizes this variant takes (multiples of
// 16 up to 128: the query and the 16 chains are 8 + 16 of the 32 registers; 256, the query then
// partly read from L1 and the values in two slices); false for others.
template <class Fn>
bool dispatch(int64_t head_dim, Fn&& fn) {
  switch (head_dim) {
    case 16: fn(std::integral_constant<int, 1>{}); return true;
    case 32: fn(std::integral_constant<int, 2>{}); return true;
    case 48: fn(std::integral_constant<int, 3>{}); return true;
    case 64: fn(std::integral_constant<int, 4>{}); return true;
    case 80: fn(std::integral_constant<int, 5>{}); return true;
    case 96: fn(std::integral_constant<int, 6>{}); return true;
    case 112: fn(std::integral_constant<int, 7>{}); return true;
    case 128: fn(std::integral_constant<int, 8>{}); return true;
    case 256: fn(std::integral_constant<int, 16>{}); return true;  // Gemma's
    default: return false;
  }
}

// The cache's loaders start at key `first` (after the view's first_key; the exact rows' positions are
// their own).
template <class Fn>
void with_rows(const PagedKvView& c, const int32_t* block_table, int64_t kvh, const KvExactRows* exact, int32_t first,
               Fn&& fn) {
  fn(key_rows<LinearRows>(F32Rows{KvRowCursor(c.k, c, block_table, kvh, first)},
                          F32Rows{KvRowCursor(c.v, c, block_table, kvh, first)}, exact));
}

template <class Fn>
void with_rows(const PagedKvQuantView& c, const int32_t* block_table, int64_t kvh, const KvExactRows* exact,
               int32_t first, Fn&& fn) {
  const int64_t H = c.num_kv_heads, D = c.head_dim, B = c.block_size;
  const int32_t at = c.first_key + first;
  if (c.kind == KvQuant::Int8)
    fn(key_rows<LinearRows>(
        Int8Rows{KvSlotCursor(block_table, B, at), static_cast<const int8_t*>(c.k), c.k_scale, H, kvh, D},
        Int8Rows{KvSlotCursor(block_table, B, at), static_cast<const int8_t*>(c.v), c.v_scale, H, kvh, D}, exact));
  else
    fn(key_rows<LinearRows>(Fp8Rows{KvSlotCursor(block_table, B, at), static_cast<const uint8_t*>(c.k),
                                    _mm512_set1_ps(c.k_scale[kvh]), H, kvh, D},
                            Fp8Rows{KvSlotCursor(block_table, B, at), static_cast<const uint8_t*>(c.v),
                                    _mm512_set1_ps(c.v_scale[kvh]), H, kvh, D},
                            exact));
}

template <class View>
bool one_query(const float* q, const View& c, const int32_t* block_table, int32_t position, int64_t kvh, float scale,
               float* scores, float* out, const KvExactRows* exact, float softcap, int32_t mask) {
  return dispatch(c.head_dim, [&](auto C) {
    with_rows(c, block_table, kvh, exact, 0,
              [&](auto kr) { attention_head<C()>(q, kr, position, scale, scores, out, softcap, mask); });
  });
}

// Exact rows must start at a multiple of 4 (the shared keys' groups), at or before every tile's first
// query; so must each tile's own from (froms).
template <class View>
bool query_tiles(int tiles, const float* const* q, const int32_t* positions, const View& c,
                 const int32_t* block_table, int64_t kvh, float scale, float* const* scores, float* const* out,
                 const KvExactRows* exact, float softcap, const int32_t* masks, const int32_t* froms = nullptr) {
  if (tiles < 1 || tiles > kPagedAttentionMaxTiles || (froms && !exact)) return false;
  if (exact && exact->from % 4 != 0) return false;
  for (int t = 0; t < tiles && exact; ++t) {
    const int32_t from = froms ? froms[t] : exact->from;
    if (from % 4 != 0 || from < exact->from || from > positions[4 * t]) return false;
  }
  return dispatch(c.head_dim, [&](auto C) {
    with_rows(c, block_table, kvh, exact, 0, [&](auto kr) {
      using Rows = decltype(kr);
      auto rows_at = [&](int32_t j) {
        Rows at = kr;
        with_rows(c, block_table, kvh, exact, j, [&](auto r) {
          if constexpr (std::is_same_v<decltype(r), Rows>) at = r;
        });
        return at;
      };
      attention_tiles<C()>(tiles, q, positions, kr, rows_at, scale, scores, out, softcap, masks, froms);
    });
  });
}

// Decode attention in stages (attention.h: paged_attention_split_*), each stage's per-query work
// that of attention_head.

// Keys a pass over the group's queries covers: their rows (at most 64 x 512 bytes) are read from
// memory by the first query and from cache by the others.
constexpr int32_t kSplitKeyPass = 64;

template <class View>
bool split_scores(const SplitAttentionQueries& s, const View& c, const int32_t* block_table, float scale, int32_t j0,
                  int32_t j1) {
  return dispatch(c.head_dim, [&](auto C) {
    for (int32_t k0 = j0; k0 < j1; k0 += kSplitKeyPass) {
      const int32_t k1 = std::min(j1, k0 + kSplitKeyPass);
      if (std::is_same_v<View, PagedKvQuantView> && k1 < std::min(j1, s.exact ? s.exact->from : j1))
        with_rows(c, block_table, s.kvh, nullptr, k1, [&](auto ahead) {
          prefetch_rows(ahead.krows, std::min(j1, k1 + kSplitKeyPass) - k1, 0, c.head_dim);
        });
      for (int g = 0; g < s.group; ++g)
        with_rows(c, block_table, s.kvh, s.exact, k0, [&](auto kr) {
          __m512 qv[C()];
          for (int i = 0; i < C(); ++i) qv[i] = _mm512_loadu_ps(s.q[g] + 16 * i);
          const int32_t cut = std::clamp(kr.from, k0, k1);
          score_keys<C()>(qv, kr.krows, k0, cut, scale, s.scores[g]);  // the cache's keys, then exact ones
          if (cut < k1) {
            LinearRows kx = kr.kx_at(cut);
            score_keys<C()>(qv, kx, cut, k1, scale, s.scores[g]);
          }
        });
    }
  });
}

// score_keys' maximum over keys [0, n) (the same masked maxima in the same order; soft-capped scores'
// and a window's: cap_and_mask's, as attention_head's), the softmax, then each e_j * inv, the product
// add_values takes.
float split_softmax(float* scores, int32_t n, int32_t mask, float softcap) {
  __m512 vmax = _mm512_set1_ps(-INFINITY);
  for (int32_t j = 0; j < n; j += 16) {
    const __mmask16 live = __mmask16((1u << std::min<int32_t>(16, n - j)) - 1);
    vmax = _mm512_mask_max_ps(vmax, live, vmax, _mm512_maskz_loadu_ps(live, scores + j));
  }
  float m = _mm512_reduce_max_ps(vmax);
  m = cap_and_mask(scores, n, m, softcap, mask);
  const float inv = softmax_in_place(scores, n, m);
  for (int32_t j = 0; j < n; j += 16)  // up to the zeros softmax_in_place wrote to a multiple of 16
    _mm512_storeu_ps(scores + j, _mm512_mul_ps(_mm512_loadu_ps(scores + j), _mm512_set1_ps(inv)));
  return inv;
}

// Columns [d0, d0 + 16 P) of queries g0 .. g0 + G - 1 over keys [0, n): each value row's columns
// loaded once for the G queries, whose even / odd chains are add_values'.
template <int G, int P, class Rows>
void split_values_pass(const SplitAttentionQueries& s, int g0, const KeyRows<Rows>& kr, int32_t n, int64_t d0) {
  __m512 acc[G][2][P];
  const float* prob[G];
  for (int g = 0; g < G; ++g) {
    prob[g] = s.scores[g0 + g];
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < P; ++i) acc[g][h][i] = _mm512_setzero_ps();
  }
  auto add_key = [&](auto& rows, int h, int32_t j) {  // h: j's parity
    auto row = rows.next();
    row.p += d0;
    __m512 v[P];
    for (int i = 0; i < P; ++i) v[i] = row.load(i);
    for (int g = 0; g < G; ++g) {
      const __m512 p = _mm512_set1_ps(prob[g][j]);
      for (int i = 0; i < P; ++i) acc[g][h][i] = _mm512_fmadd_ps(p, v[i], acc[g][h][i]);
    }
  };
  auto keys = [&](auto rows, int32_t j, int32_t end) {  // j even
    constexpr bool prefetch = !std::is_same_v<decltype(rows), F32Rows> && !std::is_same_v<decltype(rows), LinearRows>;
    auto ahead = rows;  // int8 / fp8: the next pass of keys' rows asked for
    for (int32_t a = j; prefetch && a < std::min(end, j + kSplitKeyPass); ++a) ahead.next();
    for (int32_t p0 = j; p0 < end; p0 += kSplitKeyPass) {  // kSplitKeyPass even
      const int32_t p1 = std::min(end, p0 + kSplitKeyPass);
      if (prefetch) prefetch_rows(ahead, std::min(end, p1 + kSplitKeyPass) - p1, d0, 16 * P);
      for (j = p0; j + 1 < p1; j += 2) add_key(rows, 0, j), add_key(rows, 1, j + 1);
      if (j < p1) add_key(rows, 0, j);  // a last even key
    }
  };
  const int32_t cut = std::min(kr.from, n);  // the cache's keys, then exact ones (cut a multiple of 16)
  keys(kr.vrows, 0, cut);
  if (cut < n) keys(kr.vx_at(cut), cut, n);
  for (int g = 0; g < G; ++g)
    for (int i = 0; i < P; ++i)
      _mm512_storeu_ps(s.out[g0 + g] + d0 + 16 * i, _mm512_add_ps(acc[g][0][i], acc[g][1][i]));
}

// fn(G, P) as compile-time constants, G in 1..4, P in 1..2.
template <class Fn>
void with_pass_shape(int G, int P, Fn&& fn) {
  using std::integral_constant;
  switch (2 * G + P) {
    case 3: return fn(integral_constant<int, 1>{}, integral_constant<int, 1>{});
    case 4: return fn(integral_constant<int, 1>{}, integral_constant<int, 2>{});
    case 5: return fn(integral_constant<int, 2>{}, integral_constant<int, 1>{});
    case 6: return fn(integral_constant<int, 2>{}, integral_constant<int, 2>{});
    case 7: return fn(integral_constant<int, 3>{}, integral_constant<int, 1>{});
    case 8: return fn(integral_constant<int, 3>{}, integral_constant<int, 2>{});
    case 9: return fn(integral_constant<int, 4>{}, integral_constant<int, 1>{});
    default: return fn(integral_constant<int, 4>{}, integral_constant<int, 2>{});
  }
}

template <class View>
bool split_values(const SplitAttentionQueries& s, const View& c, const int32_t* block_table, int64_t d0,
                  int64_t width) {
  if (!avx512_attention_head_dim(c.head_dim)) return false;
  for (int g0 = 0; g0 < s.group; g0 += 4)
    for (int64_t d = d0; d < d0 + width;) {
      const int64_t left = d0 + width - d;
      if (s.group == 1 && left >= 64) {  // one query: up to a whole row of 128 a pass (16 chains), not 32
        with_rows(c, block_table, s.kvh, s.exact, 0, [&](auto kr) {
          if (left >= 128)
            split_values_pass<1, 8>(s, 0, kr, s.position + 1, d);
          else
            split_values_pass<1, 4>(s, 0, kr, s.position + 1, d);
        });
        d += left >= 128 ? 128 : 64;
        continue;
      }
      const int G = std::min(4, s.group - g0);
      // two queries over f32 rows: 64 columns a pass (16 chains), half the passes over the rows (at 512-4,096
      // keys x0.83-0.89 the time of 32; int8 / fp8 rows, and three queries, were slower so)
      if (std::is_same_v<View, PagedKvView> && G == 2 && left >= 64) {
        with_rows(c, block_table, s.kvh, s.exact, 0,
                  [&](auto kr) { split_values_pass<2, 4>(s, g0, kr, s.position + 1, d); });
        d += 64;
        continue;
      }
      const int P = left >= 32 ? 2 : 1;
      with_rows(c, block_table, s.kvh, s.exact, 0, [&](auto kr) {
        with_pass_shape(G, P, [&](auto g, auto p) { split_values_pass<g(), p()>(s, g0, kr, s.position + 1, d); });
      });
      d += 16 * P;
    }
  return true;
}
}  // namespace

bool paged_attention_head_avx512(const float* q, const PagedKvView& c, const int32_t* block_table, int32_t position,
                                 int64_t kvh, float scale, float* scores, float* out, float softcap, int32_t mask) {
  return one_query(q, c, block_table, position, kvh, scale, scores, out, nullptr, softcap, mask);
}

bool paged_attention_head_quant_avx512(const float* q, const PagedKvQuantView& c, const int32_t* block_table,
                                       int32_t position, int64_t kvh, float scale, float* scores, float* out,
                                       const KvExactRows* exact, int32_t mask, float softcap) {
  return one_query(q, c, block_table, position, kvh, scale, scores, out, exact, softcap, mask);
}

bool paged_attention_tiles_avx512(int tiles, const float* const* q, const int32_t* positions, const PagedKvView& c,
                                  const int32_t* block_table, int64_t kvh, float scale, float* const* scores,
                                  float* const* out, float softcap, const int32_t* masks) {
  return query_tiles(tiles, q, positions, c, block_table, kvh, scale, scores, out, nullptr, softcap, masks);
}

bool paged_attention_tiles_quant_avx512(int tiles, const float* const* q, const int32_t* positions,
                                        const PagedKvQuantView& c, const int32_t* block_table, int64_t kvh,
                                        float scale, float* const* scores, float* const* out,
                                        const KvExactRows* exact, const int32_t* masks, float softcap,
                                        const int32_t* exact_froms) {
  return query_tiles(tiles, q, positions, c, block_table, kvh, scale, scores, out, exact, softcap, masks, exact_froms);
}

bool paged_attention_split_scores_avx512(const SplitAttentionQueries& s, const PagedKvView& c,
                                         const int32_t* block_table, float scale, int32_t j0, int32_t j1) {
  return split_scores(s, c, block_table, scale, j0, j1);
}
bool paged_attention_split_scores_avx512(const SplitAttentionQueries& s, const PagedKvQuantView& c,
                                         const int32_t* block_table, float scale, int32_t j0, int32_t j1) {
  return split_scores(s, c, block_table, scale, j0, j1);
}
float paged_attention_split_softmax_avx512(float* scores, int32_t position, int32_t mask, float softcap) {
  return split_softmax(scores, position + 1, mask, softcap);
}
bool paged_attention_split_values_avx512(const SplitAttentionQueries& s, const PagedKvView& c,
                                         const int32_t* block_table, int64_t d0, int64_t width) {
  return split_values(s, c, block_table, d0, width);
}
bool paged_attention_split_values_avx512(const SplitAttentionQueries& s, const PagedKvQuantView& c,
                                         const int32_t* block_table, int64_t d0, int64_t width) {
  return split_values(s, c, block_table, d0, width);
}

}  // namespace llmctl::kernels::detail
