#include "kernels/cpu/attention.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <span>
#include <utility>
#include <vector>

#include "kernels/cpu/attention_impl.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/qlinear_impl.h"
#include "kernels/kernel_check.h"

namespace llmctl::kernels {

namespace {

// A call's keys counted from `start` (attention.h: a sliding window's A), for the variants: the view
// with first_key = start, positions and exact rows relative to it.
template <class View>
View window_view(const View& c, int32_t start) {
  KERNEL_CHECK(c.first_key == 0) << "attention: a view's first_key is the kernels' own (callers pass first)";
  View w = c;
  w.first_key = start;
  return w;
}

// Exact rows from key max(from, start) on, with `from` relative to start.
KvExactRows window_exact(const KvExactRows& e, int32_t start) {
  const int32_t skip = std::max(0, start - e.from);
  return {e.k + int64_t(skip) * e.stride, e.v + int64_t(skip) * e.stride, e.from + skip - start, e.stride};
}

void check_first(int32_t first, int32_t position, const char* kernel) {
  KERNEL_CHECK(first >= 0 && first <= position) << kernel << ": first key " << first << " for position " << position;
}

// One query's keys [first, position] as the variants take them: counted from `start`, its position
// and mask relative to it.
struct QueryWindow {
  int32_t start, position, mask;
};

QueryWindow query_window(int32_t first, int32_t position, const char* kernel) {
  check_first(first, position, kernel);
  const int32_t start = attention_window_start(first);
  return {start, position - start, first - start};
}

// paged_attention_head and _softcap: the same results, faster, where a SIMD variant runs
// (attention_impl.h: most head sizes); the SIMD variants' cap is the portable kernel's scalar one.
void head_f32(const float* q, const PagedKvView& c, const int32_t* block_table, int32_t position, int64_t kvh,
              float scale, float* scores, float* out, float softcap, int32_t first, const char* kernel) {
  const QueryWindow w = query_window(first, position, kernel);
  const PagedKvView v = window_view(c, w.start);
  if (detail::cpu_has_avx512_vnni() &&
      detail::paged_attention_head_avx512(q, v, block_table, w.position, kvh, scale, scores, out, softcap, w.mask))
    return;
  if (cpu_has_avx2() &&
      detail::paged_attention_head_avx2(q, v, block_table, w.position, kvh, scale, scores, out, softcap, w.mask))
    return;
  detail::paged_attention_head_portable(q, v, block_table, w.position, kvh, scale, scores, out, softcap, w.mask);
}

}  // namespace

void paged_attention_head(const float* q, const PagedKvView& c, const int32_t* block_table, int32_t position,
                          int64_t kvh, float scale, float* scores, float* out, int32_t first) {
  head_f32(q, c, block_table, position, kvh, scale, scores, out, 0.0f, first, "paged_attention_head");
}

bool paged_attention_quant_in_place(KvQuant kind, int64_t head_dim, bool exact) {
  if (detail::cpu_has_avx512_vnni()) return detail::avx512_attention_head_dim(head_dim);
  // AVX2 decodes e4m3 in more steps (no masked or ternary operations) and once ran a 1024-token
  // prompt 18% slower in place than through the f32 copy; since the tiles dequantize a row once for
  // all theirs and the decode stages once for a group, in place wins (default model, 2,048 keys:
  // prefill x1.1-1.2, decode x1.8).
  (void)kind, (void)exact;  // fp8's exact open-block rows: read by the AVX2 loaders too
  return cpu_has_avx2() && detail::avx2_attention_head_dim(head_dim);
}

void paged_attention_head_quant(const float* q, const PagedKvQuantView& c, const int32_t* block_table, int32_t position,
                                int64_t kvh, float scale, float* scores, float* out, const KvExactRows* exact,
                                int32_t first, float softcap) {
  KERNEL_CHECK(softcap >= 0 && std::isfinite(softcap)) << "paged_attention_head_quant: softcap " << softcap;
  KERNEL_CHECK(!exact || (exact->from >= 0 && exact->from <= position))
      << "paged_attention_head_quant: exact rows from " << (exact ? exact->from : 0) << " for position " << position;
  const QueryWindow w = query_window(first, position, "paged_attention_head_quant");
  const PagedKvQuantView v = window_view(c, w.start);
  KvExactRows ex;
  if (exact) ex = window_exact(*exact, w.start);
  KERNEL_CHECK(paged_attention_quant_in_place(c.kind, c.head_dim, exact != nullptr) &&
               (detail::cpu_has_avx512_vnni()
                    ? detail::paged_attention_head_quant_avx512(q, v, block_table, w.position, kvh, scale, scores,
                                                                out, exact ? &ex : nullptr, w.mask, softcap)
                    : detail::paged_attention_head_quant_avx2(q, v, block_table, w.position, kvh, scale, scores, out,
                                                              exact ? &ex : nullptr, w.mask, softcap)))
      << "paged_attention_head_quant: no in-place kernel for head_dim " << c.head_dim << " on this CPU";
}

namespace {

// A tile call's keys counted from the lowest first's start: positions and masks relative to it.
struct TileWindow {
  int32_t start = 0;
  int32_t positions[4 * kPagedAttentionMaxTiles], masks[4 * kPagedAttentionMaxTiles];
};

bool tile_window(int tiles, const int32_t* positions, const int32_t* firsts, TileWindow& w) {
  if (tiles < 1 || tiles > kPagedAttentionMaxTiles) return false;
  int32_t lowest = INT32_MAX;
  for (int i = 0; i < 4 * tiles; ++i) {
    const int32_t first = firsts ? firsts[i] : 0;
    check_first(first, positions[i], "paged_attention_tiles");
    lowest = std::min(lowest, first);
  }
  w.start = attention_window_start(lowest);
  for (int i = 0; i < 4 * tiles; ++i)
    w.positions[i] = positions[i] - w.start, w.masks[i] = (firsts ? firsts[i] : 0) - w.start;
  return true;
}

}  // namespace

bool paged_attention_tiles(int tiles, const float* const* q, const int32_t* positions, const PagedKvView& c,
                           const int32_t* block_table, int64_t kvh, float scale, float* const* scratch,
                           float* const* out, float softcap, const int32_t* firsts) {
  KERNEL_CHECK(softcap >= 0 && std::isfinite(softcap)) << "paged_attention_tiles: softcap " << softcap;
  TileWindow w;
  if (!tile_window(tiles, positions, firsts, w)) return false;
  const PagedKvView v = window_view(c, w.start);
  const int32_t* masks = firsts ? w.masks : nullptr;
  if (detail::cpu_has_avx512_vnni())
    return detail::paged_attention_tiles_avx512(tiles, q, w.positions, v, block_table, kvh, scale, scratch, out,
                                                softcap, masks);
  return cpu_has_avx2() && detail::paged_attention_tiles_avx2(tiles, q, w.positions, v, block_table, kvh, scale,
                                                               scratch, out, softcap, masks);
}

bool paged_attention_tiles_quant(int tiles, const float* const* q, const int32_t* positions,
                                 const PagedKvQuantView& c, const int32_t* block_table, int64_t kvh, float scale,
                                 float* const* scratch, float* const* out, const KvExactRows* exact,
                                 const int32_t* firsts, float softcap, const int32_t* exact_froms) {
  KERNEL_CHECK(softcap >= 0 && std::isfinite(softcap)) << "paged_attention_tiles_quant: softcap " << softcap;
  KERNEL_CHECK(exact || !exact_froms) << "paged_attention_tiles_quant: tiles' exact keys without exact rows";
  for (int t = 0; t < tiles && exact; ++t) {
    const int32_t from = exact_froms ? exact_froms[t] : exact->from;
    KERNEL_CHECK(exact->from >= 0 && exact->from <= from && from <= positions[4 * t])
        << "paged_attention_tiles_quant: exact rows from " << exact->from << ", tile " << t << "'s from " << from
        << ", for a tile from " << positions[4 * t];
  }
  if (!paged_attention_quant_in_place(c.kind, c.head_dim, exact != nullptr)) return false;
  TileWindow w;
  if (!tile_window(tiles, positions, firsts, w)) return false;
  const PagedKvQuantView v = window_view(c, w.start);
  const int32_t* masks = firsts ? w.masks : nullptr;
  KvExactRows ex;
  if (exact) ex = window_exact(*exact, w.start);
  int32_t froms[kPagedAttentionMaxTiles];  // relative to the window's start, as ex.from
  for (int t = 0; t < tiles && exact_froms; ++t) froms[t] = std::max(exact_froms[t], w.start) - w.start;
  const int32_t* tile_froms = exact_froms ? froms : nullptr;
  return detail::cpu_has_avx512_vnni()
             ? detail::paged_attention_tiles_quant_avx512(tiles, q, w.positions, v, block_table, kvh, scale, scratch,
                                                          out, exact ? &ex : nullptr, masks, softcap, tile_froms)
             : detail::paged_attention_tiles_quant_avx2(tiles, q, w.positions, v, block_table, kvh, scale, scratch, out,
                                                        exact ? &ex : nullptr, masks, softcap, tile_froms);
}

bool paged_attention_split_runs(int64_t head_dim) {
  if (detail::cpu_has_avx512_vnni()) return detail::avx512_attention_head_dim(head_dim);
  return cpu_has_avx2() && detail::avx2_attention_head_dim(head_dim);
}

bool paged_attention_split_runs(KvQuant kind, int64_t head_dim, bool exact) {
  return paged_attention_quant_in_place(kind, head_dim, exact);
}

int64_t paged_attention_split_columns() { return detail::cpu_has_avx512_vnni() ? 16 : 8; }

namespace {

struct CostPoint {
  int32_t keys;
  double cost;
};

// Piecewise linear in log2(keys) between the points, flat past the last. Below the first (128 keys)
// nothing was measured, and the three passes' hand-offs weigh more: infinite (never chosen).
double interpolate(std::span<const CostPoint> curve, int32_t keys) {
  if (keys < curve[0].keys) return INFINITY;
  for (size_t i = 1; i < curve.size(); ++i)
    if (keys <= curve[i].keys) {
      const double a = std::log2(double(curve[i - 1].keys)), b = std::log2(double(curve[i].keys));
      const double t = (std::log2(double(keys)) - a) / (b - a);
      return curve[i - 1].cost + t * (curve[i].cost - curve[i - 1].cost);
    }
  return curve.back().cost;
}

// AVX2, measured on an AVX2-only AMD EPYC (Zen 4): the attention time of the default model's decode
// steps (9 query heads, 3 kv heads, head_dim 64) each way, `bench latency` at 128-2048 keys on 1 and
// 2 threads; per point the larger of the ratio on 1 thread and the ratio on 2 threads over the whole
// heads' 9/10 balance. tools/llmctl_cpu_attention_bench finds the same from ~512 keys; below, where the
// two paths are within a few percent, it favours whole heads (its memory is not a step's).
constexpr CostPoint kAvx2F32[] = {{128, 1.14},  {256, 1.11},  {512, 0.96}, {1024, 0.85},
                                  {2048, 0.80}, {4096, 0.75}};
// int8: each key row dequantized once for the group in the stages, once per query head whole.
constexpr CostPoint kAvx2Int8[] = {{128, 1.10},  {256, 1.08},  {512, 1.01}, {1024, 0.90},
                                   {2048, 0.81}, {4096, 0.76}};
// AVX-512: measured only on 2 threads and 9 heads, where the stages won from 256 keys (2026-12-03,
// a Sapphire Rapids class Xeon): from 256 keys the cost is set under 1 (the stages' choice on any
// thread count, as before); below, AVX2's shape, high enough that 9 heads on 2 threads stay whole.
constexpr CostPoint kAvx512[] = {{128, 1.15}, {255, 1.12}, {256, 0.99}, {4096, 0.80}};

}  // namespace

double paged_attention_split_cost(int32_t keys) {
  return detail::cpu_has_avx512_vnni() ? interpolate(kAvx512, keys) : interpolate(kAvx2F32, keys);
}

double paged_attention_split_cost(KvQuant kind, int32_t keys) {
  (void)kind;  // fp8 as int8 (AVX2: not measured on its own)
  return detail::cpu_has_avx512_vnni() ? interpolate(kAvx512, keys) : interpolate(kAvx2Int8, keys);
}

namespace {

// The stages' queries and view with keys counted from the window's start (their `first`), the exact
// rows relative to it (held in `ex`).
template <class View>
std::pair<SplitAttentionQueries, View> split_window(const SplitAttentionQueries& s, const View& c, KvExactRows& ex) {
  const QueryWindow qw = query_window(s.first, s.position, "paged_attention_split");
  SplitAttentionQueries w = s;
  w.position = qw.position;
  w.first = 0;
  if (s.exact) ex = window_exact(*s.exact, qw.start), w.exact = &ex;
  return {w, window_view(c, qw.start)};
}

template <class View>
void split_scores(const SplitAttentionQueries& window, const View& view, const int32_t* block_table, float scale,
                  int32_t j0, int32_t j1) {
  const int32_t start = attention_window_start(window.first);
  KERNEL_CHECK(j0 >= start) << "paged_attention_split_scores: keys from " << j0 << ", the window's from " << start;
  KvExactRows ex;
  const auto [s, c] = split_window(window, view, ex);
  j0 -= start, j1 -= start;
  KERNEL_CHECK(j0 >= 0 && j0 % 16 == 0 && j0 <= j1 && (j1 % 16 == 0 || j1 == s.position + 1) && j1 <= s.position + 1)
      << "paged_attention_split_scores: keys [" << j0 << ", " << j1 << ") for position " << s.position;
  KERNEL_CHECK(!s.exact || (s.exact->from >= 0 && s.exact->from % 16 == 0 && s.exact->from <= s.position))
      << "paged_attention_split_scores: exact rows from " << s.exact->from << " for position " << s.position;
  KERNEL_CHECK(detail::cpu_has_avx512_vnni()
                   ? detail::paged_attention_split_scores_avx512(s, c, block_table, scale, j0, j1)
                   : cpu_has_avx2() && detail::paged_attention_split_scores_avx2(s, c, block_table, scale, j0, j1))
      << "paged_attention_split_scores: no kernel for head_dim " << c.head_dim << " on this CPU";
}

template <class View>
void split_values(const SplitAttentionQueries& window, const View& view, const int32_t* block_table, int64_t d0,
                  int64_t width) {
  KvExactRows ex;
  const auto [s, c] = split_window(window, view, ex);
  const int64_t unit = paged_attention_split_columns();
  KERNEL_CHECK(d0 >= 0 && width >= 0 && d0 % unit == 0 && width % unit == 0 && d0 + width <= c.head_dim)
      << "paged_attention_split_values: columns [" << d0 << ", " << d0 + width << ") of " << c.head_dim;
  KERNEL_CHECK(detail::cpu_has_avx512_vnni()
                   ? detail::paged_attention_split_values_avx512(s, c, block_table, d0, width)
                   : cpu_has_avx2() && detail::paged_attention_split_values_avx2(s, c, block_table, d0, width))
      << "paged_attention_split_values: no kernel for head_dim " << c.head_dim << " on this CPU";
}

}  // namespace

void paged_attention_split_scores(const SplitAttentionQueries& s, const PagedKvView& c, const int32_t* block_table,
                                  float scale, int32_t j0, int32_t j1) {
  KERNEL_CHECK(!s.exact) << "paged_attention_split_scores: exact rows come with an int8 / fp8 cache only";
  split_scores(s, c, block_table, scale, j0, j1);
}

void paged_attention_split_scores(const SplitAttentionQueries& s, const PagedKvQuantView& c,
                                  const int32_t* block_table, float scale, int32_t j0, int32_t j1) {
  KERNEL_CHECK(paged_attention_split_runs(c.kind, c.head_dim, s.exact != nullptr))
      << "paged_attention_split_scores: this cache is not read in place for head_dim " << c.head_dim;
  split_scores(s, c, block_table, scale, j0, j1);
}

float paged_attention_split_softmax(float* scores, int32_t position, int32_t first, float softcap) {
  KERNEL_CHECK(softcap >= 0 && std::isfinite(softcap)) << "paged_attention_split_softmax: softcap " << softcap;
  const QueryWindow w = query_window(first, position, "paged_attention_split_softmax");
  if (detail::cpu_has_avx512_vnni())
    return detail::paged_attention_split_softmax_avx512(scores, w.position, w.mask, softcap);
  KERNEL_CHECK(cpu_has_avx2()) << "paged_attention_split_softmax: no kernel on this CPU";
  return detail::paged_attention_split_softmax_avx2(scores, w.position, w.mask, softcap);
}

void paged_attention_split_values(const SplitAttentionQueries& s, const PagedKvView& c, const int32_t* block_table,
                                  int64_t d0, int64_t width) {
  KERNEL_CHECK(!s.exact) << "paged_attention_split_values: exact rows come with an int8 / fp8 cache only";
  split_values(s, c, block_table, d0, width);
}

void paged_attention_split_values(const SplitAttentionQueries& s, const PagedKvQuantView& c,
                                  const int32_t* block_table, int64_t d0, int64_t width) {
  KERNEL_CHECK(paged_attention_split_runs(c.kind, c.head_dim, s.exact != nullptr) &&
               (!s.exact || (s.exact->from % 16 == 0 && s.exact->from <= s.position)))
      << "paged_attention_split_values: this cache is not read in place for head_dim " << c.head_dim
      << (s.exact ? " with exact rows" : "");
  split_values(s, c, block_table, d0, width);
}

void paged_attention_head_softcap(const float* q, const PagedKvView& c, const int32_t* block_table, int32_t position,
                                  int64_t kvh, float scale, float softcap, float* scores, float* out, int32_t first) {
  KERNEL_CHECK(softcap > 0 && std::isfinite(softcap)) << "paged_attention_head_softcap: softcap " << softcap;
  head_f32(q, c, block_table, position, kvh, scale, scores, out, softcap, first, "paged_attention_head_softcap");
}

namespace detail {

void paged_attention_head_portable(const float* q, const PagedKvView& c, const int32_t* block_table, int32_t position,
                                   int64_t kvh, float scale, float* scores, float* out, float softcap, int32_t mask) {
  const int64_t D = c.head_dim, B = c.block_size;
  const int32_t n = position + 1;
  auto row = [&](const float* base, int32_t key) {
    const int64_t j = c.first_key + key, slot = int64_t(block_table[j / B]) * B + j % B;
    return base + (slot * c.num_kv_heads + kvh) * D;
  };
  float m = -INFINITY;
  for (int32_t j = 0; j < n; ++j) {
    const float* kr = row(c.k, j);
    float a[16] = {};
    for (int64_t d = 0; d < D; ++d) a[d % 16] = std::fma(q[d], kr[d], a[d % 16]);
    scores[j] = tree16(a) * scale;
    if (softcap > 0) scores[j] = softcap * std::tanh(scores[j] / softcap);
    m = std::max(m, scores[j]);
  }
  if (mask > 0) m = mask_scores(scores, mask, n);
  double part[16] = {};
  for (int32_t j = 0; j < n; ++j) {
    scores[j] = attention_exp(scores[j] - m);
    part[j % 16] += scores[j];
  }
  const float inv = float(1.0 / tree16(part));
  std::vector<float> even(size_t(D), 0.0f), odd(size_t(D), 0.0f);
  for (int32_t j = 0; j < n; ++j) {
    const float p = scores[j] * inv;
    const float* vr = row(c.v, j);
    float* acc = j % 2 ? odd.data() : even.data();
    for (int64_t d = 0; d < D; ++d) acc[d] = std::fma(p, vr[d], acc[d]);
  }
  for (int64_t d = 0; d < D; ++d) out[d] = even[d] + odd[d];
}

}  // namespace detail

}  // namespace llmctl::kernels
