#include "engine/core/batch_plan.h"

#include <algorithm>

#include "engine/core/error.h"

namespace llmctl {

int BatchPlan::max_context_len() const {
  int m = 0;
  for (int32_t c : context_len) m = std::max(m, int(c));
  return m;
}

BatchShape batch_shape(const BatchPlan& plan) {
  BatchShape b;
  for (int s = 0; s + 1 < int(plan.query_start.size()); ++s) {
    const int q = plan.query_start[size_t(s) + 1] - plan.query_start[size_t(s)];
    b.max_query_len = std::max(b.max_query_len, q);
    b.any_decode |= q == 1;
    b.any_prefill |= q > 1;
  }
  for (int32_t pos : plan.positions) b.max_context_len = std::max(b.max_context_len, int(pos) + 1);
  b.max_context_len = std::max(b.max_context_len, int(plan.graph_context));
  return b;
}

namespace {
// Sizes, and every block the attention of each token reads (see validate) in range; the slots of the
// new tokens agree with the table.
void validate_tables(const BatchPlan& p, const std::vector<int32_t>& slot_mapping,
                     const std::vector<int32_t>& block_table, int max_blocks, int block_size, int num_blocks,
                     int window) {
  const int T = p.num_tokens(), S = p.num_seqs();
  LLM_CHECK(int(slot_mapping.size()) == T) << "slot_mapping must be [T]";
  LLM_CHECK(max_blocks >= 0 && int64_t(block_table.size()) == int64_t(S) * max_blocks)
      << "block_table must be [S, max_blocks_per_seq]";
  for (int s = 0; s < S; ++s) {
    LLM_CHECK(int64_t(p.context_len[s]) <= int64_t(max_blocks) * block_size)
        << "context of seq " << s << " exceeds its blocks";
    const int32_t* table = block_table.data() + int64_t(s) * max_blocks;
    int32_t first = p.context_len[s];  // the first key any of its tokens reads
    for (int t = p.query_start[s]; t < p.query_start[s + 1]; ++t) {
      first = std::min(first, window > 0 ? std::max(0, p.positions[t] - window + 1) : 0);
      const int32_t blk = table[p.positions[t] / block_size];
      LLM_CHECK(slot_mapping[t] == blk * block_size + p.positions[t] % block_size)
          << "slot_mapping disagrees with block_table";
    }
    if (p.query_start[s] == p.query_start[s + 1]) continue;
    for (int32_t b = first / block_size; b < (p.context_len[s] + block_size - 1) / block_size; ++b)
      LLM_CHECK(table[b] >= 0 && table[b] < num_blocks) << "block id " << table[b] << " out of range";
  }
}
}  // namespace

void BatchPlan::validate(int block_size, int num_blocks, int window) const {
  const int T = num_tokens(), S = num_seqs();
  LLM_CHECK(int(positions.size()) == T) << "per-token arrays differ in size";
  LLM_CHECK(int(query_start.size()) == S + 1 && query_start[0] == 0 && query_start[S] == T)
      << "query_start must be prefix sums ending at " << T;
  for (int s = 0; s < S; ++s) {
    LLM_CHECK(query_start[s] <= query_start[s + 1]) << "query_start not monotonic at " << s;
    for (int t = query_start[s]; t < query_start[s + 1]; ++t)
      LLM_CHECK(positions[t] >= 0 && positions[t] < context_len[s]) << "position " << positions[t] << " outside context";
  }
  validate_tables(*this, slot_mapping, block_table, max_blocks_per_seq, block_size, num_blocks, window);
  for (int32_t r : logits_rows) LLM_CHECK(r >= 0 && r < T) << "logits row " << r << " out of range";
  LLM_CHECK(exact_slot.empty() || int(exact_slot.size()) == S) << "exact_slot must be [S] or empty";
  for (int32_t e : exact_slot) LLM_CHECK(e >= -1) << "exact slot " << e << " out of range";
  LLM_CHECK(exact_copies.size() % 2 == 0) << "exact_copies must be (src, dst) pairs";
  for (int32_t e : exact_copies) LLM_CHECK(e >= 0) << "exact slot copy of slot " << e;
  LLM_CHECK(graph_context == 0 || (graph_context >= max_context_len() && graph_context <= max_blocks_per_seq * block_size))
      << "graph_context " << graph_context << " does not cover the plan";
}

void BatchPlan::validate_window_tables(int block_size, int num_blocks, int window) const {
  validate_tables(*this, window_slot_mapping, window_block_table, window_max_blocks_per_seq, block_size, num_blocks,
                  window);
  LLM_CHECK(graph_context == 0 || graph_context <= window_max_blocks_per_seq * block_size)
      << "graph_context " << graph_context << " does not cover the window tables";
}

BatchPlan BatchPlan::window_view() const {
  LLM_CHECK(has_window_tables()) << "a plan without window tables";
  BatchPlan p = *this;
  p.slot_mapping = window_slot_mapping;
  p.block_table = window_block_table;
  p.max_blocks_per_seq = window_max_blocks_per_seq;
  p.window_slot_mapping.clear();
  p.window_block_table.clear();
  p.window_max_blocks_per_seq = 0;
  return p;
}

BatchPlan slice_plan(const BatchPlan& plan, int s0, int s1) {
  LLM_CHECK(0 <= s0 && s0 < s1 && s1 <= plan.num_seqs()) << "slice_plan: sequences [" << s0 << ", " << s1 << ") of "
                                                          << plan.num_seqs();
  LLM_CHECK(std::is_sorted(plan.logits_rows.begin(), plan.logits_rows.end())) << "slice_plan: logits rows out of order";
  const int t0 = plan.query_start[s0], t1 = plan.query_start[s1];
  BatchPlan p;
  p.token_ids.assign(plan.token_ids.begin() + t0, plan.token_ids.begin() + t1);
  p.positions.assign(plan.positions.begin() + t0, plan.positions.begin() + t1);
  p.slot_mapping.assign(plan.slot_mapping.begin() + t0, plan.slot_mapping.begin() + t1);
  p.query_start.clear();
  for (int s = s0; s <= s1; ++s) p.query_start.push_back(plan.query_start[s] - t0);
  p.context_len.assign(plan.context_len.begin() + s0, plan.context_len.begin() + s1);
  p.max_blocks_per_seq = plan.max_blocks_per_seq;
  p.block_table.assign(plan.block_table.begin() + int64_t(s0) * plan.max_blocks_per_seq,
                       plan.block_table.begin() + int64_t(s1) * plan.max_blocks_per_seq);
  for (int32_t r : plan.logits_rows)
    if (r >= t0 && r < t1) p.logits_rows.push_back(r - t0);
  if (!plan.exact_slot.empty()) p.exact_slot.assign(plan.exact_slot.begin() + s0, plan.exact_slot.begin() + s1);
  if (plan.has_window_tables()) {
    p.window_slot_mapping.assign(plan.window_slot_mapping.begin() + t0, plan.window_slot_mapping.begin() + t1);
    p.window_max_blocks_per_seq = plan.window_max_blocks_per_seq;
    p.window_block_table.assign(plan.window_block_table.begin() + int64_t(s0) * plan.window_max_blocks_per_seq,
                                plan.window_block_table.begin() + int64_t(s1) * plan.window_max_blocks_per_seq);
  }
  p.graph_context = plan.graph_context;
  p.micro_batches = 1;  // a micro-batch is not cut again
  return p;
}

namespace {
// slot_mapping / block_table of a plan padded as pad_decode_plan says.
void pad_tables(const BatchPlan& plan, const std::vector<int32_t>& slots, const std::vector<int32_t>& table,
                int max_blocks, int seqs, int width, int block_size, int scratch_block, std::vector<int32_t>& out_slots,
                std::vector<int32_t>& out_table) {
  LLM_CHECK(width >= max_blocks) << "pad_decode_plan: block table wider than the graph context";
  out_slots = slots;
  out_slots.resize(size_t(seqs), scratch_block * block_size);
  out_table.assign(size_t(seqs) * width, -1);
  for (int s = 0; s < plan.num_seqs(); ++s)
    std::copy_n(table.begin() + int64_t(s) * max_blocks, max_blocks, out_table.begin() + int64_t(s) * width);
  for (int s = plan.num_seqs(); s < seqs; ++s) out_table[size_t(s) * width] = scratch_block;
}
}  // namespace

BatchPlan pad_decode_plan(const BatchPlan& plan, int seqs, int graph_context, int block_size, int scratch_block,
                          int window_scratch_block) {
  LLM_CHECK(plan.decode_only() && seqs >= plan.num_seqs()) << "pad_decode_plan: not a decode step that fits";
  LLM_CHECK(graph_context >= plan.max_context_len() && graph_context % block_size == 0)
      << "pad_decode_plan: graph_context " << graph_context;
  LLM_CHECK(!plan.has_window_tables() || window_scratch_block >= 0) << "pad_decode_plan: no window scratch block";
  const int width = graph_context / block_size;
  BatchPlan p;
  p.token_ids = plan.token_ids;
  p.positions = plan.positions;
  p.context_len = plan.context_len;
  p.token_ids.resize(seqs, 0);
  p.positions.resize(seqs, 0);
  p.context_len.resize(seqs, 1);
  p.query_start.resize(seqs + 1);
  for (int s = 0; s <= seqs; ++s) p.query_start[s] = s;
  p.max_blocks_per_seq = width;
  pad_tables(plan, plan.slot_mapping, plan.block_table, plan.max_blocks_per_seq, seqs, width, block_size,
             scratch_block, p.slot_mapping, p.block_table);
  if (plan.has_window_tables()) {
    p.window_max_blocks_per_seq = width;
    pad_tables(plan, plan.window_slot_mapping, plan.window_block_table, plan.window_max_blocks_per_seq, seqs, width,
               block_size, window_scratch_block, p.window_slot_mapping, p.window_block_table);
  }
  LLM_CHECK(plan.exact_copies.empty()) << "pad_decode_plan: a plan with exact slot copies";
  if (!plan.exact_slot.empty()) {
    p.exact_slot = plan.exact_slot;
    p.exact_slot.resize(seqs, -1);
  }
  p.logits_rows.resize(seqs);
  for (int s = 0; s < seqs; ++s) p.logits_rows[s] = s;
  p.graph_context = graph_context;
  return p;
}

}  // namespace llmctl
