// How a step's query tokens go to the pool as attention work. A sequence's tokens come as units:
// four consecutive tokens (a tile, kernels::paged_attention_tiles) or one. An item is a run of a
// sequence's consecutive tiles times some query heads of one kv head: the kernel reads each of that
// kv head's rows once for all of them (a GQA group's heads and a prompt's next tokens read the same
// rows), so items are made as large as the kernel takes while the threads still get enough of them
// to share the work. A single token is an item per query head.
#pragma once
#include <cstdint>
#include <vector>

namespace llmctl::cpu {

struct AttentionUnit {
  int32_t first, count, seq;  // query rows [first, first + count) of sequence seq; count 4 or 1
};

struct AttentionItem {
  int32_t unit, units;  // units [unit, unit + units): tiles of one sequence, or one single token
  int32_t head, heads;  // query heads [head, head + heads), all reading kv head head / group
};

// Items for `units` (in sequence order, a sequence's tiles consecutive) over hq query heads in
// groups of `group` per kv head: a tile item takes heads x units <= max_tiles tiles, the largest
// such shape that still gives at least 4 items per thread (else the smallest, one tile). Items go
// kv head by kv head (a thread's consecutive items read one kv head's rows, which stay in L2 / L3),
// and within one, long and short runs alternate (balanced_order) so the threads' shares even out.
std::vector<AttentionItem> attention_items(const std::vector<AttentionUnit>& units, int hq, int group,
                                           int max_tiles, int threads);

// The k-th of n runs of query tokens (a sequence's in order) in the order attention hands them to
// threads: 0, n - 1, 1, n - 2, ... A causal prompt's later tokens read longer contexts; contiguous
// ranges of this order (what parallel_for gives each thread) cost about the same, where ranges of
// 0..n-1 left the thread with the last tokens three times the work of the one with the first. Each
// token's result is the same whichever thread computes it.
inline int64_t balanced_order(int64_t k, int64_t n) { return k % 2 == 0 ? k / 2 : n - 1 - k / 2; }

}  // namespace llmctl::cpu
