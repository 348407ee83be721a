// The variants behind attention.h's paged_attention_head (internal), and the scalar pieces of the
// order they share.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/kv_quant.h"

namespace llmctl::kernels::detail {

// e^x for x <= 0 (a score minus the maximum), the SIMD variants' operations one lane at a time:
// n = nearest integer to x * log2(e); r = x - n * ln2 in two fma steps (ln2 split into a high part
// exact in float and the rest); e^r by Horner over the degree-7 Taylor polynomial (error below
// 1e-8 relative for |r| <= ln2 / 2, under float's rounding); times 2^n built in the exponent bits.
// Below -87 the result is 0 (e^-87 is near float's smallest normal); NaN stays NaN.
struct ExpConstants {
  static constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693145751953125f,
                         kLn2Lo = 1.42860682030941723e-6f, kMin = -87.0f;
  // 1/7!, 1/6!, ..., 1/2!, 1, 1: Horner's coefficients from the top
  static constexpr float kPoly[8] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};
};

inline float attention_exp(float x) {
  using C = ExpConstants;
  if (std::isnan(x)) return x;
  if (x < C::kMin) return 0.0f;
  const float n = std::nearbyint(x * C::kLog2e);
  float r = std::fma(n, -C::kLn2Hi, x);
  r = std::fma(n, -C::kLn2Lo, r);
  float p = C::kPoly[0];
  for (int i = 1; i < 8; ++i) p = std::fma(p, r, C::kPoly[i]);
  const uint32_t bits = uint32_t(int32_t(n) + 127) << 23;  // 2^n, n in [-126, 0]
  float two_n;
  std::memcpy(&two_n, &bits, 4);
  return p * two_n;
}

// The cache slots of keys first, first + 1, ... of a sequence, in order: a block's first slot read
// from the table when the cursor enters it, the rest counted on (no multiply or division a key; the
// kernels' loops are short enough per key for that to show). Reads the table only for keys asked for.
class KvSlotCursor {
 public:
  KvSlotCursor(const int32_t* block_table, int64_t block_size, int32_t first = 0)
      : table_(block_table + first / block_size), B_(block_size), skip_(first % block_size) {}
  int64_t next() {
    if (left_ == 0) {
      slot_ = int64_t(*table_++) * B_ + skip_;
      left_ = B_ - skip_;
      skip_ = 0;
    }
    --left_;
    return slot_++;
  }

 private:
  const int32_t* table_;  // the next block's entry
  int64_t B_, skip_, slot_ = 0, left_ = 0;
};

// The f32 cache rows of keys first, first + 1, ... of one kv head (counted from the view's first_key):
// a row pointer stepped by the slot stride inside a block.
class KvRowCursor {
 public:
  KvRowCursor(const float* base, const PagedKvView& c, const int32_t* block_table, int64_t kvh, int32_t first = 0)
      : table_(block_table + (c.first_key + first) / c.block_size),
        base_(base + kvh * c.head_dim),
        B_(c.block_size),
        skip_((c.first_key + first) % c.block_size),
        stride_(c.num_kv_heads * c.head_dim) {}
  const float* next() {
    if (left_ == 0) {
      row_ = base_ + (int64_t(*table_++) * B_ + skip_) * stride_;
      left_ = B_ - skip_;
      skip_ = 0;
    }
    --left_;
    const float* r = row_;
    row_ += stride_;
    return r;
  }

 private:
  const int32_t* table_;
  const float* base_;
  const float* row_ = nullptr;
  int64_t B_, skip_, stride_, left_ = 0;
};

// Exact f32 rows in a run (attention.h: KvExactRows), from a given key on; Row: a SIMD variant's f32
// row (its own type, so every use is that variant's instantiation).
template <class RowType>
struct LinearRowsOf {
  using Row = RowType;
  const float* p;
  int64_t stride;
  Row next() {
    const float* r = p;
    p += stride;
    return {r};
  }
};

// The keys of a query: [0, from) through the cache's loaders (krows, vrows, at key 0) and [from, n)
// from exact rows (kx, vx, at key `from`; none when from >= n). Each key's products and sums are the
// same operations wherever its row comes from, so splitting a loop at `from` changes no bits, and
// keeps the choice of loader out of the loop.
template <class Rows, class Linear>
struct KeyRowsOf {
  Rows krows, vrows;
  Linear kx, vx;
  int32_t from;
  // exact rows positioned at key j >= from
  Linear kx_at(int32_t j) const { return {kx.p + (j - from) * kx.stride, kx.stride}; }
  Linear vx_at(int32_t j) const { return {vx.p + (j - from) * vx.stride, vx.stride}; }
};

// A cache's loaders with the exact rows (null: none, `from` past every key).
template <class Linear, class Rows>
KeyRowsOf<Rows, Linear> key_rows(Rows k, Rows v, const KvExactRows* exact) {
  if (!exact) return {k, v, {nullptr, 0}, {nullptr, 0}, INT32_MAX};
  return {k, v, {exact->k, exact->stride}, {exact->v, exact->stride}, exact->from};
}

// P0 + P1 + P2 + P3 in the order attention.h gives (float scores, double denominators).
template <class T>
inline T tree16(const T* a) {
  T p[4];
  for (int L = 0; L < 4; ++L) p[L] = (a[4 * L] + a[4 * L + 2]) + (a[4 * L + 1] + a[4 * L + 3]);
  return (p[0] + p[1]) + (p[2] + p[3]);
}

// Scores [0, n) soft-capped in place, softcap * tanh(score / softcap) as the portable kernel takes
// them (scalar std::tanh: the same bits), and their maximum (the portable kernel's chain of std::max).
inline float softcap_scores(float* scores, int32_t n, float softcap) {
  float m = -INFINITY;
  for (int32_t j = 0; j < n; ++j) {
    scores[j] = softcap * std::tanh(scores[j] / softcap);
    m = std::max(m, scores[j]);
  }
  return m;
}

// A sliding window's scores [0, mask) masked (attention.h): -inf, after any soft-capping; returns the
// maximum of scores [mask, n) as a chain of std::max in key order.
inline float mask_scores(float* scores, int32_t mask, int32_t n) {
  float m = -INFINITY;
  for (int32_t j = 0; j < mask; ++j) scores[j] = -INFINITY;
  for (int32_t j = mask; j < n; ++j) m = std::max(m, scores[j]);
  return m;
}

// The maximum a query's softmax takes from scores [0, n) whose own maximum is m: soft-capped first
// (softcap > 0), then a window's [0, mask) masked (mask > 0), in that order (attention.h).
inline float cap_and_mask(float* scores, int32_t n, float m, float softcap, int32_t mask) {
  if (softcap > 0) m = softcap_scores(scores, n, softcap);
  if (mask > 0) m = mask_scores(scores, mask, n);
  return m;
}

// Asks for the cache lines of elements [first, first + count) of the next `keys` rows of a SIMD
// variant's row loader (advanced past them; its rows' .p the first element): the decode stages read
// rows 1-4 KB apart, a page every few rows, which the hardware prefetchers leave to the loads (each
// row's first line then missed, and a loop dequantizing int8 / fp8 rows keeps few rows in flight).
// The stages ask for them a pass of keys ahead; f32 rows (4-8 lines each) were slower so: left to the
// hardware. (Rows are each variant's own types: every use is its own instantiation.)
template <class Rows>
void prefetch_rows(Rows& rows, int32_t keys, int64_t first, int64_t count) {
  for (int32_t j = 0; j < keys; ++j) {
    const auto r = rows.next();
    const char* begin = reinterpret_cast<const char*>(r.p + first);
    const char* end = reinterpret_cast<const char*>(r.p + first + count);
    for (const char* p = begin; p < end; p += 64) __builtin_prefetch(p, 0, 3);
  }
}

// The variants below take a window's keys counted from the view's first_key (attention.h), with
// `mask` (a tile's: masks[i], null for none) leading keys masked.

// The portable kernel (any head_dim); softcap > 0: scores soft-capped (paged_attention_head_softcap).
void paged_attention_head_portable(const float* q, const PagedKvView& c, const int32_t* block_table, int32_t position,
                                   int64_t kvh, float scale, float* scores, float* out, float softcap = 0.0f,
                                   int32_t mask = 0);

// The head sizes the AVX-512 kernels take: multiples of 16 up to 128 (the query and 16 chains in
// registers), and 256 (Gemma's: values in two slices); the AVX2 ones: multiples of 32 up to 128, and
// 256 (P @ V of one query takes 32 columns a pass).
inline bool avx512_attention_head_dim(int64_t head_dim) {
  return (head_dim % 16 == 0 && head_dim >= 16 && head_dim <= 128) || head_dim == 256;
}
inline bool avx2_attention_head_dim(int64_t head_dim) {
  return (head_dim % 32 == 0 && head_dim >= 32 && head_dim <= 128) || head_dim == 256;
}

// AVX2/FMA (head_dim 32, 64, 96, 128, 256) and AVX-512 (avx512_attention_head_dim); they return false,
// doing nothing, for other sizes. The portable kernel's results bit for bit. Call only where
// cpu_has_avx2() (kernels/cpu/linear.h) / cpu_has_avx512_vnni() (kernels/cpu/qlinear_impl.h).
// softcap > 0: soft-capped scores (paged_attention_head_softcap), the cap itself scalar.
bool paged_attention_head_avx2(const float* q, const PagedKvView& c, const int32_t* block_table, int32_t position,
                               int64_t kvh, float scale, float* scores, float* out, float softcap = 0.0f,
                               int32_t mask = 0);
bool paged_attention_head_avx512(const float* q, const PagedKvView& c, const int32_t* block_table, int32_t position,
                                 int64_t kvh, float scale, float* scores, float* out, float softcap = 0.0f,
                                 int32_t mask = 0);
// The AVX-512 kernel reading an int8 or fp8 cache in place, each element dequantized in registers
// exactly as dequantize_kv_row_int8 / _fp8 (kv_quant.h) compute it: the results of
// dequantize_kv_positions followed by the f32 kernel, bit for bit, without the f32 copy. Same head
// sizes as paged_attention_head_avx512; false for others.
// With `exact` (may be null), keys [exact->from, position] come from its f32 rows.
bool paged_attention_head_quant_avx512(const float* q, const PagedKvQuantView& c, const int32_t* block_table,
                                       int32_t position, int64_t kvh, float scale, float* scores, float* out,
                                       const KvExactRows* exact, int32_t mask = 0, float softcap = 0.0f);
// The same on AVX2 (head_dim 32, 64, 96, 128, 256), exact rows too.
bool paged_attention_head_quant_avx2(const float* q, const PagedKvQuantView& c, const int32_t* block_table,
                                     int32_t position, int64_t kvh, float scale, float* scores, float* out,
                                     const KvExactRows* exact, int32_t mask = 0, float softcap = 0.0f);
// Tiles of four query tokens at once (attention.h: paged_attention_tiles), f32 and quantized caches,
// rows in blocks shared by the tiles: AVX2 (the head sizes of paged_attention_head_avx2) and AVX-512.
// softcap > 0: scores soft-capped as paged_attention_head_softcap's (the quantized variants too).
bool paged_attention_tiles_avx2(int tiles, const float* const* q, const int32_t* positions, const PagedKvView& c,
                                const int32_t* block_table, int64_t kvh, float scale, float* const* scores,
                                float* const* out, float softcap = 0.0f, const int32_t* masks = nullptr);
bool paged_attention_tiles_quant_avx2(int tiles, const float* const* q, const int32_t* positions,
                                      const PagedKvQuantView& c, const int32_t* block_table, int64_t kvh, float scale,
                                      float* const* scores, float* const* out, const KvExactRows* exact,
                                      const int32_t* masks = nullptr, float softcap = 0.0f,
                                      const int32_t* exact_froms = nullptr);
bool paged_attention_tiles_avx512(int tiles, const float* const* q, const int32_t* positions, const PagedKvView& c,
                                  const int32_t* block_table, int64_t kvh, float scale, float* const* scores,
                                  float* const* out, float softcap = 0.0f, const int32_t* masks = nullptr);
bool paged_attention_tiles_quant_avx512(int tiles, const float* const* q, const int32_t* positions,
                                        const PagedKvQuantView& c, const int32_t* block_table, int64_t kvh,
                                        float scale, float* const* scores, float* const* out,
                                        const KvExactRows* exact, const int32_t* masks = nullptr,
                                        float softcap = 0.0f, const int32_t* exact_froms = nullptr);

// The stages of attention.h's paged_attention_split_* (false, doing nothing, for head sizes the
// variant does not take): over f32, int8 and fp8 caches (fp8 with its exact open-block rows).
bool paged_attention_split_scores_avx512(const SplitAttentionQueries& s, const PagedKvView& c,
                                         const int32_t* block_table, float scale, int32_t j0, int32_t j1);
bool paged_attention_split_scores_avx512(const SplitAttentionQueries& s, const PagedKvQuantView& c,
                                         const int32_t* block_table, float scale, int32_t j0, int32_t j1);
float paged_attention_split_softmax_avx512(float* scores, int32_t position, int32_t mask = 0, float softcap = 0.0f);
bool paged_attention_split_values_avx512(const SplitAttentionQueries& s, const PagedKvView& c,
                                         const int32_t* block_table, int64_t d0, int64_t width);
bool paged_attention_split_values_avx512(const SplitAttentionQueries& s, const PagedKvQuantView& c,
                                         const int32_t* block_table, int64_t d0, int64_t width);
bool paged_attention_split_scores_avx2(const SplitAttentionQueries& s, const PagedKvView& c,
                                       const int32_t* block_table, float scale, int32_t j0, int32_t j1);
bool paged_attention_split_scores_avx2(const SplitAttentionQueries& s, const PagedKvQuantView& c,
                                       const int32_t* block_table, float scale, int32_t j0, int32_t j1);
float paged_attention_split_softmax_avx2(float* scores, int32_t position, int32_t mask = 0, float softcap = 0.0f);
bool paged_attention_split_values_avx2(const SplitAttentionQueries& s, const PagedKvView& c,
                                       const int32_t* block_table, int64_t d0, int64_t width);
bool paged_attention_split_values_avx2(const SplitAttentionQueries& s, const PagedKvQuantView& c,
                                       const int32_t* block_table, int64_t d0, int64_t width);

}  // namespace llmctl::kernels::detail
