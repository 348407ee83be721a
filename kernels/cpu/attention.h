// Paged causal attention for one query token and one query head (CPU reference and production
// kernel). The cache is [NB, B, Hkv, D] f32; the token at `position` reads cache positions
// 0..position of its sequence through block_table.
//
// Every variant (portable, AVX2, AVX-512) computes the same operations in the same order, so the
// results are the same bits on every CPU and whatever else shares the batch:
//   score_j  = tree16(a) * scale, a[l] = the fma chain over d = l, l + 16, l + 32, ... < D of
//              q[d] * k_j[d] (from 0), tree16(a) = P0 + P1 + P2 + P3 added as ((P0 + P1) + (P2 + P3)),
//              P_L = (a[4L] + a[4L + 2]) + (a[4L + 1] + a[4L + 3]);
//   e_j      = attention_exp(score_j - max score) (attention_impl.h: Cody-Waite reduction, degree-7
//              Taylor polynomial; 0 below -87);
//   inv      = float(1 / tree16 of 16 double partial sums, partial l adding e_j for j % 16 == l in order);
//   out[d]   = even[d] + odd[d], where even (odd) is the fma chain over the even (odd) keys j, in
//              order, of (e_j * inv) * v_j[d], from 0.
//
// A sliding window: a query given `first` reads keys [first, position] only. Its keys are counted
// from A = first rounded down to a multiple of 16 (attention_window_start) and the keys [A, first)
// masked: their scores become -inf after any soft-capping, the maximum is the chain of std::max over
// the rest, and their e_j are then exactly 0, adding exact zeros to the sums and chains (their value
// rows must be finite). Lanes (j % 16) and parities (j % 2) are the same counted from any multiple of
// 16, so a query's results do not depend on where its keys are counted from: tiles count all their
// queries' keys from the lowest one's A, each query masking up to its own first.
#pragma once
#include <cstdint>

#include "kernels/cpu/kv_quant.h"

namespace llmctl::kernels {

struct PagedKvView {
  const float* k;  // [NB, B, Hkv, D]
  const float* v;
  int64_t block_size, num_kv_heads, head_dim;
  // Key j of a kernel's call is the sequence's key first_key + j (the kernels set it for a sliding
  // window; callers leave it 0).
  int32_t first_key = 0;
};

// Where a window's kernels count its keys from (above): `first` rounded down to a multiple of 16.
inline int32_t attention_window_start(int32_t first) { return first / 16 * 16; }

// Floats of scratch paged_attention_head needs for a token at `position`: position + 1 rounded up
// to a multiple of 16, and 16 more (the SIMD variants write whole groups of 16 scores, from any
// multiple of 4).
inline int64_t paged_attention_scratch(int64_t position) { return (position + 16) / 16 * 16 + 16; }

// out[D] = softmax(q . K[first..position] * scale) @ V, for kv head kvh, in the order above (first >
// 0: a sliding window's). scratch: paged_attention_scratch(position) floats.
void paged_attention_head(const float* q, const PagedKvView& cache, const int32_t* block_table, int32_t position,
                          int64_t kvh, float scale, float* scratch, float* out, int32_t first = 0);

// paged_attention_head with Gemma 2's attention logit soft-capping: each score s (q . k * scale, in
// the order above) becomes softcap * tanh(s / softcap) before the softmax, the cap by scalar
// std::tanh wherever the scores come from (a SIMD variant's, the same bits): the CPU backend runs it
// for soft-capped layers, over its contiguous copy.
void paged_attention_head_softcap(const float* q, const PagedKvView& cache, const int32_t* block_table,
                                  int32_t position, int64_t kvh, float scale, float softcap, float* scratch, float* out,
                                  int32_t first = 0);

// Keys [from, position] of a query read exact, in f32, instead of from the quantized cache: a
// sequence's open block kept beside an fp8 cache (engine/backend/kv_exact_rows.h). Key j's rows are
// k + (j - from) * stride and v + (j - from) * stride (pointers already at the query's kv head).
struct KvExactRows {
  const float* k;
  const float* v;
  int32_t from;
  int64_t stride;
};

// The same over an int8 / fp8 cache read in place: the results of dequantize_kv_positions (kv_quant.h)
// followed by paged_attention_head (softcap > 0: paged_attention_head_softcap), bit for bit, without
// the f32 copy of the context; with `exact`, the copy's rows [from, position] replaced by the exact
// ones first. Runs where paged_attention_quant_in_place(kind, head_dim, exact) (AVX-512: head_dim a
// multiple of 16 up to 128, or 256; AVX2: head_dim 32, 64, 96, 128, 256); elsewhere the caller
// dequantizes first.
bool paged_attention_quant_in_place(KvQuant kind, int64_t head_dim, bool exact = false);
void paged_attention_head_quant(const float* q, const PagedKvQuantView& cache, const int32_t* block_table,
                                int32_t position, int64_t kvh, float scale, float* scratch, float* out,
                                const KvExactRows* exact = nullptr, int32_t first = 0, float softcap = 0.0f);

// Tiles of four query tokens reading kv head kvh of one sequence: tile t is q[4t..4t+3] at ascending
// positions positions[4t..4t+3]; tiles in any order (a GQA group's query heads on the same tokens, a
// prompt's successive tokens on one head). The results of 4 x tiles paged_attention_head (cache) or
// paged_attention_head_quant (qcache) calls, bit for bit, with each key row a tile reads loaded once
// for its four queries instead of once per query, and each row read from the cache once for all the
// tiles, a block of rows at a time kept in L1 while every tile passes over it (a prompt's attention
// then reads its context once per 4 x tiles tokens). scratch[i]:
// paged_attention_scratch(positions[i]). False, doing nothing, where no such kernel runs (AVX-512:
// head_dim a multiple of 16 up to 128, or 256; AVX2: 32, 64, 96, 128, 256, and for quantized caches
// where paged_attention_quant_in_place says so) or tiles is not in [1, kPagedAttentionMaxTiles].
inline constexpr int kPagedAttentionMaxTiles = 8;
// softcap > 0: each query's scores soft-capped as paged_attention_head_softcap's (the same bits).
// firsts (may be null: all 0): each query's first key, a sliding window's (above; ascending within a
// tile, as its positions).
bool paged_attention_tiles(int tiles, const float* const* q, const int32_t* positions, const PagedKvView& cache,
                           const int32_t* block_table, int64_t kvh, float scale, float* const* scratch,
                           float* const* out, float softcap = 0.0f, const int32_t* firsts = nullptr);
// With `exact`, the queries read keys from exact->from on from its rows: exact->from <= positions[4t]
// for every tile (one open block). exact_froms (null: exact->from for every tile): tile t's own first
// exact key instead, in [exact->from, positions[4t]]; its keys before it come from the cache (a
// prompt's tiles in several blocks, each reading its own block's keys exact, as paged_attention_head_quant
// with that block's rows would; the rows serve every key from exact->from on). False, doing nothing,
// where a from is not a multiple of 4.
bool paged_attention_tiles_quant(int tiles, const float* const* q, const int32_t* positions,
                                 const PagedKvQuantView& qcache, const int32_t* block_table, int64_t kvh, float scale,
                                 float* const* scratch, float* const* out, const KvExactRows* exact = nullptr,
                                 const int32_t* firsts = nullptr, float softcap = 0.0f,
                                 const int32_t* exact_froms = nullptr);

// Decode attention spread over threads. Run whole, a token's query heads are one item each (9 heads
// on 16 threads leave 7 idle) and each reads its kv head's whole context. Here one token at
// `position` and the `group` query heads that read kv head kvh go through three stages whose items
// may run on different threads, a stage starting when the one before has finished:
//   1. paged_attention_split_scores: keys [j0, j1) into scores[g][j0, j1), each key row read from
//      memory once for the group. j0 a multiple of 16; j1 too, or position + 1 (the SIMD variants
//      then write up to 15 floats past it: scores[g] holds paged_attention_scratch(position) floats);
//   2. paged_attention_split_softmax: one query's scores [0, position] -> its probabilities in place,
//      e^(score - max) x inv, where inv (returned) is 1 / the exponentials' sum (softcap > 0: the
//      scores soft-capped first, as paged_attention_head_softcap's);
//   3. paged_attention_split_values: columns [d0, d0 + width) of the group's outputs from stage 2's
//      probabilities, each value row read once for the group; d0 and width multiples of
//      paged_attention_split_columns().
// The outputs are paged_attention_head's (_softcap's, _quant's) for each query, bit for bit:
// each score, maximum, sum and chain is the same operations in the same order, only spread
// differently. Runs where paged_attention_split_runs says so (the SIMD variants' head sizes; int8 /
// fp8 caches where they are read in place, with exact rows where the variant reads those: AVX-512).
// A sliding window (first > 0): the keys are [A, position], A = attention_window_start(first), j0 a
// multiple of 16 from A, scores[g][j - A] key j's, stage 2 told `first` (it masks keys [A, first)).
struct SplitAttentionQueries {
  const float* const* q;  // [group] queries (stage 1)
  float* const* scores;   // [group] scores, then stage 2's probabilities
  float* const* out;      // [group] outputs of head_dim floats (stage 3)
  int group;
  int32_t position;
  int64_t kvh;
  // int8 / fp8 caches: keys [exact->from, position] read from these rows instead (attention.h's
  // KvExactRows, at kv head kvh; from a multiple of 16), as paged_attention_head_quant takes them.
  const KvExactRows* exact = nullptr;
  int32_t first = 0;  // the queries' first key (a sliding window's), stages 1 and 3
};
bool paged_attention_split_runs(int64_t head_dim);
bool paged_attention_split_runs(KvQuant kind, int64_t head_dim, bool exact = false);
int64_t paged_attention_split_columns();
// The time the stages take for a decode token of `keys` keys over the whole-head kernels', both on
// one thread, on this CPU's variant (a measured curve, attention.cpp): above 1 for short contexts,
// where their extra passes cost more than reading each row once for a GQA group saves, under 1 for
// long ones; infinite under 128 keys (not measured there). Spread over threads the stages keep every
// thread busy, where whole heads leave some idle: the caller weighs the two
// (cpu::split_decode_attention_pays).
double paged_attention_split_cost(int32_t keys);
double paged_attention_split_cost(KvQuant kind, int32_t keys);
void paged_attention_split_scores(const SplitAttentionQueries& s, const PagedKvView& cache, const int32_t* block_table,
                                  float scale, int32_t j0, int32_t j1);
void paged_attention_split_scores(const SplitAttentionQueries& s, const PagedKvQuantView& cache,
                                  const int32_t* block_table, float scale, int32_t j0, int32_t j1);
float paged_attention_split_softmax(float* scores, int32_t position, int32_t first = 0, float softcap = 0.0f);
void paged_attention_split_values(const SplitAttentionQueries& s, const PagedKvView& cache, const int32_t* block_table,
                                  int64_t d0, int64_t width);
void paged_attention_split_values(const SplitAttentionQueries& s, const PagedKvQuantView& cache,
                                  const int32_t* block_table, int64_t d0, int64_t width);

}  // namespace llmctl::kernels
