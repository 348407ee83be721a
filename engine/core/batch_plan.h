// BatchPlan: everything one forward step needs to know about its batch, built by the scheduler.
// Prefill chunks and decodes share a step. T = new tokens in the step, S = sequences.
//
//   token_ids     [T]        flattened new tokens of all sequences
//   positions     [T]        their absolute positions
//   slot_mapping  [T]        cache slot of each new token: block_table[s][pos / B] * B + pos % B
//   query_start   [S+1]      prefix sums of new tokens per sequence
//   context_len   [S]        tokens in the cache after this step (what attention reads)
//   block_table   [S, Mb]    physical block ids per sequence (row-major, -1 padded)
//   logits_rows   [S']       rows of the step (token indices) that produce logits
//   exact_slot    [S] or []  with exact open-block rows beside the cache (engine/backend/kv_exact_rows.h):
//                            each sequence's slot in them (-1: none); [] without them
//   exact_copies  [2k]       (src, dst) slot pairs copied before the step (forked sequences)
//   window_slot_mapping [T], window_block_table [S, Mw]
//                            where sliding-window layers keep their KV in a pool of their own
//                            (engine/kv/kv_cache_groups.h): their slots and tables, read by those layers
//                            in place of slot_mapping and block_table; [] otherwise
// A table entry is -1 past a sequence's blocks, and for blocks a sliding window no longer reads.
#pragma once
#include <cstdint>
#include <vector>

namespace llmctl {

struct BatchPlan {
  std::vector<int32_t> token_ids;
  std::vector<int32_t> positions;
  std::vector<int32_t> slot_mapping;
  std::vector<int32_t> query_start{0};
  std::vector<int32_t> context_len;
  std::vector<int32_t> block_table;
  int32_t max_blocks_per_seq = 0;
  std::vector<int32_t> logits_rows;
  std::vector<int32_t> exact_slot;
  std::vector<int32_t> exact_copies;
  std::vector<int32_t> window_slot_mapping;
  std::vector<int32_t> window_block_table;
  int32_t window_max_blocks_per_seq = 0;
  // > 0 for a step replayed from a graph: kernels size their grids for this context length (at
  // least the longest context in the plan) so that one capture serves every step of its bucket.
  int32_t graph_context = 0;
  // Pipeline parallel: how many micro-batches the step is cut into (every stage must cut it the
  // same way); 0: the runner decides (ModelRunner::micro_batches).
  int32_t micro_batches = 0;

  int num_tokens() const { return int(token_ids.size()); }
  int num_seqs() const { return int(context_len.size()); }
  int max_context_len() const;
  bool has_window_tables() const { return !window_slot_mapping.empty(); }
  // Throws Error when the arrays disagree (sizes, monotonic query_start, slots in range, ...). Every
  // block a token's attention reads must be in [0, num_blocks): the whole context, or with window > 0
  // the keys (position - window, position].
  void validate(int block_size, int num_blocks, int window = 0) const;
  // The same for the window tables, over their own pool.
  void validate_window_tables(int block_size, int num_blocks, int window) const;
  // The plan as the layers reading the window tables see it: those in place of slot_mapping and
  // block_table (and no window tables of its own).
  BatchPlan window_view() const;
  // A decode-only step: every sequence has exactly one new token.
  bool decode_only() const { return num_tokens() == num_seqs() && num_seqs() > 0; }
};

// What a step's attention kernels size their grids by, computed once per step (Backend::prepare_batch
// keeps it in DeviceBatch::shape) rather than once per layer.
struct BatchShape {
  int max_query_len = 0;     // most new tokens of one sequence
  int max_context_len = 0;   // longest context a new token reads (its position + 1), at least graph_context
  bool any_decode = false;   // a sequence with one new token
  bool any_prefill = false;  // a sequence with several
};
BatchShape batch_shape(const BatchPlan& plan);

// The sequences [s0, s1) of a plan as a plan of their own (a pipeline micro-batch): their tokens,
// rebased to start at 0, their block table rows and exact slots, and the logits rows among their
// tokens (rebased). Not the exact slot copies: the runner makes those once, before the micro-batches.
// logits_rows must be ascending (the scheduler's order), so the sub-plans' logits rows, one after
// another, are the plan's.
BatchPlan slice_plan(const BatchPlan& plan, int s0, int s1);

// A decode-only plan padded to `seqs` sequences with block tables `graph_context / block_size` wide
// (graph_context >= the plan's longest context): the extra sequences decode token 0 at position 0
// into block `scratch_block` (window_scratch_block in the window tables), which no request owns.
// Logits rows: one per sequence, in order.
BatchPlan pad_decode_plan(const BatchPlan& plan, int seqs, int graph_context, int block_size, int scratch_block,
                          int window_scratch_block = -1);

}  // namespace llmctl
