// AVX2/FMA variant of paged_attention_head (attention.cpp picks it where AVX-512 is absent), for
// head_dim 32, 64, 96, 128 or 256, in attention.h's order bit for bit, over an f32 cache or, each row
// dequantized in registers by the loaders below, an int8 / fp8 one (a query's own block then
// optionally from exact f32 rows: the keys go in two runs, KeyRows, each loop over one loader):
//   scores: per key, lanes 0..7 and 8..15 of its 16 fma chains in two vectors; four keys at a time,
//           for independent chains, and their four tree16 sums taken together by shuffles;
//   softmax: attention_exp 8 lanes at a time (the same operations), the 16 double partial sums in
//           four 4-lane vectors;
//   p @ V:  lanes are d; the even and odd keys' chains in separate accumulators, over 32 columns
//           at a time (8 of the 16 registers).
// And tiles of four queries (paged_attention_tiles): key rows loaded once for a tile's four queries,
// value rows once for two, all copied into L1 a block of keys at a time for every tile (int8 / fp8
// ones dequantized), the same operations per (query, key) in the same order.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cpu/attention_impl.h"
#include "kernels/kernel_check.h"

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

// Cache rows, one loader per layout: next() gives key / value j's row in order, and a row's load(i)
// its elements 8i..8i+7 as f32 (the AVX-512 loaders' operations, 8 lanes at a time).
struct F32Rows {
  KvRowCursor cursor;
  struct Row {
    const float* p;
    __m256 load(int i) const { return _mm256_loadu_ps(p + 8 * i); }
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
    __m256 s, z;
    __m256 load(int i) const {
      const __m256i c = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * i)));
      __m256 prod = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(c, _mm256_set1_epi32(128))), s);
      asm("" : "+x"(prod));
      return _mm256_add_ps(prod, z);
    }
  };
  [[gnu::always_inline]] Row next() {
    const int64_t at = slots.next() * heads + kvh;
    return {codes + at * D, _mm256_set1_ps(scale_zero[2 * at]), _mm256_set1_ps(scale_zero[2 * at + 1])};
  }
};

// e4m3 codes with one scale per head: fp8_e4m3_to_f32(q) * scale for every code the quantizer
// writes, as attention_avx512.cpp's Fp8Rows builds it (exponent and mantissa moved into an f32's and
// rebiased; a subnormal code as 2^-6 * (1 + m / 8) - 2^-6; the magnitude times the scale rounded
// once; the sign xor-ed in).
struct Fp8Rows {
  KvSlotCursor slots;
  const uint8_t* codes;
  __m256 s;
  int64_t heads, kvh, D;
  struct Row {
    const uint8_t* p;
    __m256 s;
    __m256 load(int i) const {
      const __m256i c = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * i)));
      const __m256i em = _mm256_and_si256(c, _mm256_set1_epi32(0x7f));
      const __m256i sub = _mm256_cmpgt_epi32(_mm256_set1_epi32(8), em);  // exponent 0
      __m256i bits = _mm256_add_epi32(_mm256_slli_epi32(em, 20), _mm256_set1_epi32(120 << 23));
      bits = _mm256_add_epi32(bits, _mm256_and_si256(sub, _mm256_set1_epi32(1 << 23)));
      __m256 mag = _mm256_castsi256_ps(bits);
      mag = _mm256_blendv_ps(mag, _mm256_sub_ps(mag, _mm256_set1_ps(0x1p-6f)), _mm256_castsi256_ps(sub));
      const __m256i v = _mm256_castps_si256(_mm256_mul_ps(mag, s));
      const __m256i sign = _mm256_and_si256(_mm256_slli_epi32(c, 24), _mm256_set1_epi32(INT32_MIN));
      return _mm256_castsi256_ps(_mm256_xor_si256(v, sign));
    }
  };
  [[gnu::always_inline]] Row next() { return {codes + (slots.next() * heads + kvh) * D, s}; }
};

// Exact f32 rows in a run, and a query's keys split between the cache's rows and them
// (attention_impl.h).
using LinearRows = LinearRowsOf<F32Rows::Row>;
template <class Rows>
using KeyRows = KeyRowsOf<Rows, LinearRows>;

// Rows [j0, j1) of a query's keys as f32 into buf, `vectors` x 8 floats of each from column d0 (row j
// at (j - j0) * 8 vectors): the cache's (`cache`, at key j0) before `from`, then the exact ones
// (`exact`, at key max(j0, from)); both loaders left at j1.
template <class Rows>
[[gnu::always_inline]] inline void copy_rows(Rows& cache, LinearRows& exact, int32_t from, int32_t j0, int32_t j1,
                                             int64_t d0, int vectors, float* buf) {
  auto copy = [&](auto& src, int32_t a, int32_t b) __attribute__((always_inline)) {
    for (int32_t j = a; j < b; ++j) {
      auto r = src.next();
      r.p += d0;
      for (int i = 0; i < vectors; ++i) _mm256_store_ps(buf + (j - j0) * 8 * vectors + 8 * i, r.load(i));
    }
  };
  const int32_t cut = std::clamp(from, j0, j1);
  copy(cache, j0, cut);
  copy(exact, cut, j1);
}

// add(h, j) for keys j .. end - 1 in order, h = j's parity (the even and odd keys' chains), two keys
// a step so that h is a constant in the loop. The lambdas given it are always inlined: as calls their
// captured chains lived on the stack (the decode stages' values 1.5x slower).
template <class Add>
[[gnu::always_inline]] inline void each_key(int32_t j, int32_t end, Add&& add) {
  if (j < end && j % 2) add(1, j++);
  for (; j + 1 < end; j += 2) add(0, j), add(1, j + 1);
  if (j < end) add(0, j);  // a last even key
}

// Scores of keys [from, n) of one query (krows positioned at key from) into scores[from, n); returns
// their maximum (-inf for none). Four keys at a time.
template <int C, class Rows>
float score_keys(const float* q, Rows& krows_ref, int32_t from, int32_t n, float scale, float* scores) {
  Rows krows = krows_ref;  // a local copy stays in registers (the reference's members were stored a key)
  float m = -INFINITY;
  for (int32_t j0 = from; j0 < n; j0 += 4) {
    const int keys = std::min<int32_t>(4, n - j0);
    __m256 lo[4], hi[4];
    typename Rows::Row kr[4];
    for (int kk = 0; kk < 4; ++kk) {
      lo[kk] = hi[kk] = _mm256_setzero_ps();
      kr[kk] = kk < keys ? krows.next() : kr[0];  // past the last key: recompute key j0, unused
    }
    for (int i = 0; i < C; ++i) {
      const __m256 q0 = _mm256_loadu_ps(q + 16 * i), q1 = _mm256_loadu_ps(q + 16 * i + 8);
      for (int kk = 0; kk < 4; ++kk) {
        lo[kk] = _mm256_fmadd_ps(q0, kr[kk].load(2 * i), lo[kk]);
        hi[kk] = _mm256_fmadd_ps(q1, kr[kk].load(2 * i + 1), hi[kk]);
      }
    }
    alignas(16) float s4[4];
    _mm_store_ps(s4, _mm_mul_ps(tree16x4(lo, hi), _mm_set1_ps(scale)));
    for (int kk = 0; kk < keys; ++kk) {
      scores[j0 + kk] = s4[kk];
      m = std::max(m, s4[kk]);
    }
  }
  krows_ref = krows;
  return m;
}

// scores[0, n) -> e^(score - m) in place (zeros to the next multiple of 16); returns 1 / their sum.
inline float softmax_in_place(float* scores, int32_t n, float m) {
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
  return float(1.0 / detail::tree16(sums));
}

template <int C, class Rows>  // C = head_dim / 16; softcap > 0: soft-capped scores; mask: a window's
void attention_head(const float* q, KeyRows<Rows> kr, int32_t position, float scale, float* scores, float* out,
                    float softcap = 0.0f, int32_t mask = 0) {
  const int32_t n = position + 1, from = std::min(kr.from, n);
  float m = score_keys<C>(q, kr.krows, 0, from, scale, scores);  // the cache's keys, then exact ones
  m = std::max(m, score_keys<C>(q, kr.kx, from, n, scale, scores));
  m = cap_and_mask(scores, n, m, softcap, mask);
  const float inv = softmax_in_place(scores, n, m);
  for (int d0 = 0; d0 < 2 * C; d0 += 4) {  // 32 columns (4 loads of 8): 4 vectors x even / odd keys
    __m256 acc[2][4];
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 4; ++i) acc[h][i] = _mm256_setzero_ps();
    auto add_keys = [&](auto rows, int32_t j, int32_t end) __attribute__((always_inline)) {  // rows at key j
      each_key(j, end, [&](int h, int32_t k) __attribute__((always_inline)) {
        const __m256 p = _mm256_set1_ps(scores[k] * inv);
        const auto vr = rows.next();
        for (int i = 0; i < 4; ++i) acc[h][i] = _mm256_fmadd_ps(p, vr.load(d0 + i), acc[h][i]);
      });
    };
    add_keys(kr.vrows, 0, from);
    add_keys(kr.vx, from, n);
    for (int i = 0; i < 4; ++i) _mm256_storeu_ps(out + 8 * (d0 + i), _mm256_add_ps(acc[0][i], acc[1][i]));
  }
}

// One key of parity h into a query pair's chains (the four-query tile's value passes): its 16 value
// columns v0, v1 times each query's probability p0, p1.
inline void add_value(__m256 (&acc)[2][2][2], int h, __m256 v0, __m256 v1, float p0, float p1) {
  asm("" : "+x"(v0), "+x"(v1));  // each loaded once into a register (not folded into both queries' fmas: 7%)
  const __m256 a = _mm256_set1_ps(p0), b = _mm256_set1_ps(p1);
  acc[0][h][0] = _mm256_fmadd_ps(a, v0, acc[0][h][0]);
  acc[0][h][1] = _mm256_fmadd_ps(a, v1, acc[0][h][1]);
  acc[1][h][0] = _mm256_fmadd_ps(b, v0, acc[1][h][0]);
  acc[1][h][1] = _mm256_fmadd_ps(b, v1, acc[1][h][1]);
}

// The end of the four-query tile's value pass over columns 8 d0 .. 8 d0 + 15 for queries t0, t0 + 1:
// each query's keys past the `shared` ones (the cache's from `rows`, at key `shared`, before `from`;
// exact ones from `exact`, at key `from`, on) into its chains acc[t], then even + odd chains to its
// output.
template <class Rows>
void finish_pair(const Rows& rows, const LinearRows& exact, int32_t from, int32_t shared, const int32_t* n, int t0,
                 int d0, float* const* scores, const float* inv, __m256 (&acc)[2][2][2], float* const* out) {
  for (int t = 0; t < 2; ++t) {
    auto add = [&](auto tail, int32_t j0, int32_t j1) __attribute__((always_inline)) {
      for (int32_t j = j0; j < j1; ++j) {
        const __m256 p = _mm256_set1_ps(scores[t0 + t][j] * inv[t0 + t]);
        const auto vr = tail.next();
        acc[t][j % 2][0] = _mm256_fmadd_ps(p, vr.load(d0), acc[t][j % 2][0]);
        acc[t][j % 2][1] = _mm256_fmadd_ps(p, vr.load(d0 + 1), acc[t][j % 2][1]);
      }
    };
    const int32_t cut = std::clamp(from, shared, n[t0 + t]);
    add(rows, shared, cut);
    add(exact, cut, n[t0 + t]);
    for (int i = 0; i < 2; ++i)
      _mm256_storeu_ps(out[t0 + t] + 8 * (d0 + i), _mm256_add_ps(acc[t][0][i], acc[t][1][i]));
  }
}

// Keys a block of the tiles holds: their f32 rows (dequantized from int8 / fp8) laid one after
// another, 16 KB, in L1 (64 keys at head_dim 64, 32 at 128), which every tile's passes read before
// the next block is loaded, so a row is read from the cache (and dequantized) once per call. In the
// cache a kv head's rows are num_kv_heads x head_dim floats apart: passes straight over them read one
// line a row, 1-4 KB apart with 4-8 kv heads, which the hardware prefetchers do not follow across
// pages and which evict each other from the few L1 sets they map to. A multiple of 4: the tiles'
// shared keys go in groups of 4.
template <int C>
constexpr int32_t kKeyBlock = 4096 / (16 * C) / 4 * 4;

// A block's rows, one after another (a loader as the cache's).
template <int C>
struct BlockRows {
  const float* p;
  struct Row {
    const float* p;
    __m256 load(int i) const { return _mm256_load_ps(p + 8 * i); }
  };
  Row next() {
    const float* r = p;
    p += 16 * C;
    return {r};
  }
};

// Scores of one tile's four queries q[0..3] for keys [j0, j1) (multiples of 4; rows at key j0): each
// key row loaded once for the four (4 queries x 2 chains in 8 registers); their maxima into vmax
// (lane t: query t).
template <int C, class Rows>
void tile_scores(const float* const* q, Rows rows, int32_t j0, int32_t j1, float scale, float* const* scores,
                 __m128& vmax) {
  for (int32_t j = j0; j < j1; j += 4) {
    __m128 sk[4];  // key j + k, lane t = query t
    for (int k = 0; k < 4; ++k) {
      const auto kr = rows.next();
      __m256 lo[4], hi[4];
      for (int t = 0; t < 4; ++t) lo[t] = hi[t] = _mm256_setzero_ps();
      for (int i = 0; i < C; ++i) {
        const __m256 k0 = kr.load(2 * i), k1 = kr.load(2 * i + 1);
        for (int t = 0; t < 4; ++t) {
          lo[t] = _mm256_fmadd_ps(_mm256_loadu_ps(q[t] + 16 * i), k0, lo[t]);
          hi[t] = _mm256_fmadd_ps(_mm256_loadu_ps(q[t] + 16 * i + 8), k1, hi[t]);
        }
      }
      sk[k] = _mm_mul_ps(tree16x4(lo, hi), _mm_set1_ps(scale));
      vmax = _mm_max_ps(vmax, sk[k]);
    }
    _MM_TRANSPOSE4_PS(sk[0], sk[1], sk[2], sk[3]);  // now sk[t]: query t, keys j..j + 3
    for (int t = 0; t < 4; ++t) _mm_storeu_ps(scores[t] + j, sk[t]);
  }
}

// `tiles` tiles of four query tokens at ascending positions (tile t: q[4t..4t+3]) reading one kv
// head: the results of attention_head for each query, bit for bit (every product and sum the same
// operation in the same order). Tile t's keys [0, shared_t), shared_t = (its first position + 1)
// rounded down to 4, are read a block at a time (kKeyBlock keys' rows in L1) by every tile that reads
// them: key rows loaded once per block for a tile's four queries, value rows once per pair of queries
// and 16 columns (2 queries x 2 parities x 2 vectors of chains), each pass's chains carried from
// block to block so each query adds its keys in order. Each query's other keys alone. Exact rows
// (kr.from < INT32_MAX) start at a multiple of 4 no later than any tile's first query; tile t reads
// them from froms[t] (null: kr.from; a multiple of 4 in [kr.from, its first query]), the cache's rows
// before. A tile whose from is past kr.from shares only keys before kr.from (the blocks hold exact
// rows from there); its keys from there on go alone, the cache's then the exact ones. rows_at(j): the
// KeyRows with the cache's loaders at key j. softcap > 0: each query's scores soft-capped as
// attention_head's; masks (null: none) each query's window mask, as attention_head's.
template <int C, class Rows, class RowsAt>
void attention_tiles(int tiles, const float* const* q, const int32_t* positions, const KeyRows<Rows>& kr,
                     RowsAt&& rows_at, float scale, float* const* scores, float* const* out, float softcap,
                     const int32_t* masks, const int32_t* froms) {
  constexpr int64_t D = 16 * C;
  constexpr int32_t kBlock = kKeyBlock<C>;
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
  alignas(32) float rows[kBlock * D];
  auto blocks = [&](Rows cache, LinearRows exact, auto&& pass) {  // pass(tile, j0, end) over each block
    for (int32_t j0 = 0; j0 < all; j0 += kBlock) {
      const int32_t j1 = std::min(all, j0 + kBlock);
      copy_rows(cache, exact, from, j0, j1, 0, 2 * C, rows);
      for (int t = 0; t < tiles; ++t)
        if (shared[t] > j0) pass(t, j0, std::min(j1, shared[t]));
    }
  };
  __m128 vmax[kPagedAttentionMaxTiles];
  for (int t = 0; t < tiles; ++t) vmax[t] = _mm_set1_ps(-INFINITY);
  blocks(kr.krows, from < all ? kr.kx_at(from) : LinearRows{nullptr, 0}, [&](int t, int32_t j0, int32_t end) {
    tile_scores<C>(q + 4 * t, BlockRows<C>{rows}, j0, end, scale, scores + 4 * t, vmax[t]);
  });
  float inv[4 * kPagedAttentionMaxTiles];
  for (int i = 0; i < queries; ++i) {  // each query's other keys alone, then its softmax
    const int t = i / 4;
    alignas(16) float lane_max[4];
    _mm_store_ps(lane_max, vmax[t]);
    const int32_t cut = std::clamp(tfrom[t], shared[t], n[i]);  // the cache's keys, then exact ones
    float m = lane_max[i % 4];
    if (shared[t] < cut) {
      auto rest = rows_at(shared[t]).krows;
      m = std::max(m, score_keys<C>(q[i], rest, shared[t], cut, scale, scores[i]));
    }
    if (cut < n[i]) {
      LinearRows rest = kr.kx_at(cut);
      m = std::max(m, score_keys<C>(q[i], rest, cut, n[i], scale, scores[i]));
    }
    m = cap_and_mask(scores[i], n[i], m, softcap, masks ? masks[i] : 0);
    inv[i] = softmax_in_place(scores[i], n[i], m);
  }
  // [tile][query pair][16-column piece][query of the pair][key parity][8 columns]
  __m256 carry[kPagedAttentionMaxTiles][2][C][2][2][2];
  for (int t = 0; t < tiles; ++t) std::fill_n(&carry[t][0][0][0][0][0], 16 * C, _mm256_setzero_ps());
  blocks(kr.vrows, from < all ? kr.vx_at(from) : LinearRows{nullptr, 0}, [&](int t, int32_t j0, int32_t end) {
    for (int pair = 0; pair < 2; ++pair) {
      const int t0 = 4 * t + 2 * pair;
      for (int piece = 0; piece < C; ++piece) {
        auto& acc = carry[t][pair][piece];
        for (int32_t j = j0; j < end; j += 2)
          for (int h = 0; h < 2; ++h) {
            const float* row = rows + (j + h - j0) * D + 16 * piece;
            add_value(acc, h, _mm256_load_ps(row), _mm256_load_ps(row + 8), scores[t0][j + h] * inv[t0],
                      scores[t0 + 1][j + h] * inv[t0 + 1]);
          }
      }
    }
  });
  for (int t = 0; t < tiles; ++t) {  // the tile's keys past the shared ones: the cache's, then exact ones
    const int32_t cut = std::max(tfrom[t], shared[t]);
    const Rows after = rows_at(shared[t]).vrows;
    const LinearRows exact = cut < n[4 * t + 3] ? kr.vx_at(cut) : LinearRows{nullptr, 0};
    for (int pair = 0; pair < 2; ++pair)
      for (int piece = 0; piece < C; ++piece)
        finish_pair(after, exact, cut, shared[t], n + 4 * t, 2 * pair, 2 * piece, scores + 4 * t, inv + 4 * t,
                    carry[t][pair][piece], out + 4 * t);
  }
}

// fn(std::integral_constant<int, head_dim / 16>) for head_dim 32, 64, 96, 128, 256 (P @ V of one
// query takes 32 columns a pass); false for others.
template <class Fn>
bool dispatch(int64_t head_dim, Fn&& fn) {
  switch (head_dim) {
    case 32: fn(std::integral_constant<int, 2>{}); return true;
    case 64: fn(std::integral_constant<int, 4>{}); return true;
    case 96: fn(std::integral_constant<int, 6>{}); return true;
    case 128: fn(std::integral_constant<int, 8>{}); return true;
    case 256: fn(std::integral_constant<int, 16>{}); return true;  // Gemma's
    default: return false;
  }
}

// The key rows of a cache view for kv head kvh with the exact ones (null: none; attention_impl.h:
// KeyRows), passed to fn. The cache's loaders start at key `first` (after the view's first_key; the
// exact rows' positions are their own).
template <class Fn>
void with_rows(const PagedKvView& c, const int32_t* block_table, int64_t kvh, const KvExactRows* exact, int32_t first,
               Fn&& fn) {
  KERNEL_CHECK(!exact) << "attention: exact rows come with an int8 / fp8 cache only";
  fn(key_rows<LinearRows>(F32Rows{KvRowCursor(c.k, c, block_table, kvh, first)},
                          F32Rows{KvRowCursor(c.v, c, block_table, kvh, first)}, nullptr));
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
                                    _mm256_set1_ps(c.k_scale[kvh]), H, kvh, D},
                            Fp8Rows{KvSlotCursor(block_table, B, at), static_cast<const uint8_t*>(c.v),
                                    _mm256_set1_ps(c.v_scale[kvh]), H, kvh, D},
                            exact));
}

template <class View>
bool one_query(const float* q, const View& c, const int32_t* block_table, int32_t position, int64_t kvh, float scale,
               float* scores, float* out, float softcap, int32_t mask, const KvExactRows* exact = nullptr) {
  return dispatch(c.head_dim, [&](auto C) {
    with_rows(c, block_table, kvh, exact, 0,
              [&](auto kr) { attention_head<C()>(q, kr, position, scale, scores, out, softcap, mask); });
  });
}

// Exact rows must start at a multiple of 4 (the shared keys' groups), at or before every tile's first
// query.
template <class View>
bool query_tiles(int tiles, const float* const* q, const int32_t* positions, const View& c,
                 const int32_t* block_table, int64_t kvh, float scale, float* const* scores, float* const* out,
                 float softcap, const int32_t* masks, const KvExactRows* exact = nullptr,
                 const int32_t* froms = nullptr) {
  if (tiles < 1 || tiles > kPagedAttentionMaxTiles || (froms && !exact)) return false;
  if (exact && exact->from % 4 != 0) return false;
  for (int t = 0; t < tiles && exact; ++t) {
    const int32_t from = froms ? froms[t] : exact->from;
    if (from % 4 != 0 || from < exact->from || from > positions[4 * t]) return false;
  }
  return dispatch(c.head_dim, [&](auto C) {
    with_rows(c, block_table, kvh, exact, 0, [&](auto kr) {
      using Rows = decltype(kr);
      auto rows_at = [&](int32_t j) {  // the cache's loaders at key j
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

// Keys a pass over the group's queries covers: their rows are read from memory by the first query
// and from cache by the others.
constexpr int32_t kSplitKeyPass = 64;

template <class View>
bool split_scores(const SplitAttentionQueries& s, const View& c, const int32_t* block_table, float scale, int32_t j0,
                  int32_t j1) {
  if (std::is_same_v<View, PagedKvView> && s.exact) return false;  // exact rows come with int8 / fp8 caches
  const int32_t from = s.exact ? s.exact->from : INT32_MAX;
  return dispatch(c.head_dim, [&](auto C) {
    constexpr int64_t D = 16 * C();
    for (int32_t k0 = j0; k0 < j1; k0 += kSplitKeyPass) {
      const int32_t k1 = std::min(j1, k0 + kSplitKeyPass);
      if constexpr (std::is_same_v<View, PagedKvView>) {
        for (int g = 0; g < s.group; ++g)
          with_rows(c, block_table, s.kvh, nullptr, k0,
                    [&](auto kr) { score_keys<C()>(s.q[g], kr.krows, k0, k1, scale, s.scores[g]); });
      } else {  // each row dequantized once for the group: the same f32 values its loader gives each query
        alignas(32) float rows[kSplitKeyPass * D];
        if (k1 < std::min(j1, from))  // the next pass's cache rows asked for
          with_rows(c, block_table, s.kvh, nullptr, k1, [&](auto ahead) {
            prefetch_rows(ahead.krows, std::min({j1, from, k1 + kSplitKeyPass}) - k1, 0, D);
          });
        with_rows(c, block_table, s.kvh, s.exact, k0, [&](auto kr) {
          LinearRows exact = k1 > from ? kr.kx_at(std::max(k0, from)) : LinearRows{nullptr, 0};
          copy_rows(kr.krows, exact, from, k0, k1, 0, 2 * C(), rows);
        });
        for (int g = 0; g < s.group; ++g) {
          LinearRows dense{rows, D};  // the pass's rows, one after another
          score_keys<C()>(s.q[g], dense, k0, k1, scale, s.scores[g]);
        }
      }
    }
  });
}

// score_keys' maximum over keys [0, n) (its chain of std::max's value; soft-capped scores' and a
// window's: cap_and_mask's, as attention_head's), the softmax, then each e_j * inv, the product
// attention_head's values take.
float split_softmax(float* scores, int32_t n, int32_t mask, float softcap) {
  // score_keys' chain passes over NaNs (std::max(m, NaN) is m) and keeps the first of equal values: 8
  // lanes of vmaxps(score, m), which returns m for a NaN or an equal score, then the lanes, give the
  // same maximum but for the sign of a zero, which changes no e_j (x - 0 and x - -0 are equal but for
  // x = -0, and e^+0 = e^-0).
  __m256 lanes = _mm256_set1_ps(-INFINITY);
  int32_t j = 0;
  for (; j + 8 <= n; j += 8) lanes = _mm256_max_ps(_mm256_loadu_ps(scores + j), lanes);
  alignas(32) float lane[8];
  _mm256_store_ps(lane, lanes);
  float m = -INFINITY;
  for (float x : lane) m = std::max(m, x);
  for (; j < n; ++j) m = std::max(m, scores[j]);
  m = cap_and_mask(scores, n, m, softcap, mask);
  const float inv = softmax_in_place(scores, n, m);
  for (int32_t j = 0; j < n; j += 8)  // up to the zeros softmax_in_place wrote to a multiple of 16
    _mm256_storeu_ps(scores + j, _mm256_mul_ps(_mm256_loadu_ps(scores + j), _mm256_set1_ps(inv)));
  return inv;
}

// Columns [d0, d0 + 8 P) of queries g0 .. g0 + G - 1 over keys [0, n): each value row's columns
// loaded once for the G queries, whose even / odd chains are attention_head's.
template <int G, int P, class Rows>
void split_values_pass(const SplitAttentionQueries& s, int g0, const KeyRows<Rows>& kr, int32_t n, int64_t d0) {
  __m256 acc[G][2][P];
  const float* prob[G];
  for (int g = 0; g < G; ++g) {
    prob[g] = s.scores[g0 + g];
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < P; ++i) acc[g][h][i] = _mm256_setzero_ps();
  }
  auto keys = [&](auto rows, int32_t j, int32_t end) __attribute__((always_inline)) {  // rows at key j
    each_key(j, end, [&](int h, int32_t k) __attribute__((always_inline)) {
      auto row = rows.next();
      row.p += d0;
      __m256 v[P];
      for (int i = 0; i < P; ++i) v[i] = row.load(i);
      for (int g = 0; g < G; ++g) {
        const __m256 p = _mm256_set1_ps(prob[g][k]);
        for (int i = 0; i < P; ++i) acc[g][h][i] = _mm256_fmadd_ps(p, v[i], acc[g][h][i]);
      }
    });
  };
  const int32_t cut = std::min(kr.from, n);  // the cache's keys, then exact ones
  keys(kr.vrows, 0, cut);
  if (cut < n) keys(kr.vx_at(cut), cut, n);
  for (int g = 0; g < G; ++g)
    for (int i = 0; i < P; ++i)
      _mm256_storeu_ps(s.out[g0 + g] + d0 + 8 * i, _mm256_add_ps(acc[g][0][i], acc[g][1][i]));
}

// split_values_pass over columns [d0, d0 + width) (a multiple of 8 P) in width / 8P passes, a block of
// kSplitKeyPass keys' rows at a time copied (int8 dequantized) into L1 for all of them, each pass's
// chains carried from block to block: the same operations in the same order. In place each pass
// read every row again (a line or two of it, rows 1-4 KB apart) and dequantized its columns.
template <int G, int P, class Rows>
void split_values_blocks(const SplitAttentionQueries& s, int g0, const KeyRows<Rows>& kr, int32_t n, int64_t d0,
                         int64_t width) {
  constexpr int kMaxSlices = 128 / (8 * P);
  alignas(32) float rows[kSplitKeyPass * 128];
  __m256 carry[kMaxSlices][G][2][P];
  const int slices = int(width / (8 * P));
  for (int sl = 0; sl < slices; ++sl) std::fill_n(&carry[sl][0][0][0], G * 2 * P, _mm256_setzero_ps());
  const float* prob[G];
  for (int g = 0; g < G; ++g) prob[g] = s.scores[g0 + g];
  const int32_t from = std::min(kr.from, n);
  Rows cache = kr.vrows;
  LinearRows exact = from < n ? kr.vx_at(from) : LinearRows{nullptr, 0};
  // int8 / fp8: the next block's cache rows asked for (f32 rows, 4-8 lines each, were slower so)
  constexpr bool prefetch = !std::is_same_v<Rows, F32Rows>;
  Rows ahead = kr.vrows;
  for (int32_t j = 0; prefetch && j < std::min(from, kSplitKeyPass); ++j) ahead.next();
  for (int32_t k0 = 0; k0 < n; k0 += kSplitKeyPass) {  // k0 even
    const int32_t k1 = std::min(n, k0 + kSplitKeyPass);
    if (prefetch && k1 < from) prefetch_rows(ahead, std::min(from, k1 + kSplitKeyPass) - k1, d0, width);
    copy_rows(cache, exact, from, k0, k1, d0, int(width / 8), rows);
    for (int sl = 0; sl < slices; ++sl) {
      __m256 acc[G][2][P];
      std::copy_n(&carry[sl][0][0][0], G * 2 * P, &acc[0][0][0]);
      each_key(k0, k1, [&](int h, int32_t j) __attribute__((always_inline)) {
        const float* r = rows + (j - k0) * width + 8 * P * sl;
        __m256 v[P];
        for (int i = 0; i < P; ++i) v[i] = _mm256_load_ps(r + 8 * i);
        for (int g = 0; g < G; ++g) {
          const __m256 p = _mm256_set1_ps(prob[g][j]);
          for (int i = 0; i < P; ++i) acc[g][h][i] = _mm256_fmadd_ps(p, v[i], acc[g][h][i]);
        }
      });
      std::copy_n(&acc[0][0][0], G * 2 * P, &carry[sl][0][0][0]);
    }
  }
  for (int sl = 0; sl < slices; ++sl)
    for (int g = 0; g < G; ++g)
      for (int i = 0; i < P; ++i)
        _mm256_storeu_ps(s.out[g0 + g] + d0 + 8 * P * sl + 8 * i,
                         _mm256_add_ps(carry[sl][g][0][i], carry[sl][g][1][i]));
}

// fn(G, P) as compile-time constants: G in 1..4, P 2 for G <= 3 (at most 12 of the 16 registers
// hold chains), else 1.
template <class Fn>
void with_pass_shape(int G, bool wide, Fn&& fn) {
  using std::integral_constant;
  switch (G) {
    case 1: return wide ? fn(integral_constant<int, 1>{}, integral_constant<int, 2>{})
                        : fn(integral_constant<int, 1>{}, integral_constant<int, 1>{});
    case 2: return wide ? fn(integral_constant<int, 2>{}, integral_constant<int, 2>{})
                        : fn(integral_constant<int, 2>{}, integral_constant<int, 1>{});
    case 3: return wide ? fn(integral_constant<int, 3>{}, integral_constant<int, 2>{})
                        : fn(integral_constant<int, 3>{}, integral_constant<int, 1>{});
    default: return fn(integral_constant<int, 4>{}, integral_constant<int, 1>{});
  }
}

template <class View>
bool split_values(const SplitAttentionQueries& s, const View& c, const int32_t* block_table, int64_t d0,
                  int64_t width) {
  if (!avx2_attention_head_dim(c.head_dim) || (std::is_same_v<View, PagedKvView> && s.exact)) return false;
  for (int g0 = 0; g0 < s.group; g0 += 4)
    for (int64_t d = d0; d < d0 + width;) {
      const int G = std::min(4, s.group - g0);
      if (G == 1 && d0 + width - d >= 32) {  // one query: 32 columns (8 chains) a pass, as attention_head's
        const int64_t w = std::min<int64_t>(128, (d0 + width - d) / 32 * 32);  // split_values_blocks' most
        with_rows(c, block_table, s.kvh, s.exact, 0,
                  [&](auto kr) { split_values_blocks<1, 4>(s, g0, kr, s.position + 1, d, w); });
        d += w;
        continue;
      }
      const bool wide = G <= 3 && d0 + width - d >= 16;
      with_rows(c, block_table, s.kvh, s.exact, 0, [&](auto kr) {
        with_pass_shape(G, wide, [&](auto g, auto p) { split_values_pass<g(), p()>(s, g0, kr, s.position + 1, d); });
      });
      d += wide ? 16 : 8;
    }
  return true;
}
}  // namespace

bool paged_attention_head_avx2(const float* q, const PagedKvView& c, const int32_t* block_table, int32_t position,
                               int64_t kvh, float scale, float* scores, float* out, float softcap, int32_t mask) {
  return one_query(q, c, block_table, position, kvh, scale, scores, out, softcap, mask);
}

bool paged_attention_head_quant_avx2(const float* q, const PagedKvQuantView& c, const int32_t* block_table,
                                     int32_t position, int64_t kvh, float scale, float* scores, float* out,
                                     const KvExactRows* exact, int32_t mask, float softcap) {
  return one_query(q, c, block_table, position, kvh, scale, scores, out, softcap, mask, exact);
}

bool paged_attention_tiles_avx2(int tiles, const float* const* q, const int32_t* positions, const PagedKvView& c,
                                const int32_t* block_table, int64_t kvh, float scale, float* const* scores,
                                float* const* out, float softcap, const int32_t* masks) {
  return query_tiles(tiles, q, positions, c, block_table, kvh, scale, scores, out, softcap, masks);
}

bool paged_attention_tiles_quant_avx2(int tiles, const float* const* q, const int32_t* positions,
                                      const PagedKvQuantView& c, const int32_t* block_table, int64_t kvh, float scale,
                                      float* const* scores, float* const* out, const KvExactRows* exact,
                                      const int32_t* masks, float softcap, const int32_t* exact_froms) {
  return query_tiles(tiles, q, positions, c, block_table, kvh, scale, scores, out, softcap, masks, exact, exact_froms);
}

bool paged_attention_split_scores_avx2(const SplitAttentionQueries& s, const PagedKvView& c,
                                       const int32_t* block_table, float scale, int32_t j0, int32_t j1) {
  return split_scores(s, c, block_table, scale, j0, j1);
}
bool paged_attention_split_scores_avx2(const SplitAttentionQueries& s, const PagedKvQuantView& c,
                                       const int32_t* block_table, float scale, int32_t j0, int32_t j1) {
  return split_scores(s, c, block_table, scale, j0, j1);
}
float paged_attention_split_softmax_avx2(float* scores, int32_t position, int32_t mask, float softcap) {
  return split_softmax(scores, position + 1, mask, softcap);
}
bool paged_attention_split_values_avx2(const SplitAttentionQueries& s, const PagedKvView& c,
                                       const int32_t* block_table, int64_t d0, int64_t width) {
  return split_values(s, c, block_table, d0, width);
}
bool paged_attention_split_values_avx2(const SplitAttentionQueries& s, const PagedKvQuantView& c,
                                       const int32_t* block_table, int64_t d0, int64_t width) {
  return split_values(s, c, block_table, d0, width);
}

}  // namespace llmctl::kernels::detail
