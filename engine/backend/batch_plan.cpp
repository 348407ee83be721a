#include "engine/backend/batch_plan.h"

#include <algorithm>

#include "engine/core/error.h"

namespace llmctl {

int BatchPlan::max_context_len() const {
  int m = 0;
  for (int32_t c : context_len) m = std::max(m, int(c));
  return m;
}

void BatchPlan::validate(int block_size, int num_blocks) const {
  const int T = num_tokens(), S = num_seqs();
  LLM_CHECK(int(positions.size()) == T && int(slot_mapping.size()) == T) << "per-token arrays differ in size";
  LLM_CHECK(int(query_start.size()) == S + 1 && query_start[0] == 0 && query_start[S] == T)
      << "query_start must be prefix sums ending at " << T;
  LLM_CHECK(int(block_table.size()) == S * max_blocks_per_seq) << "block_table must be [S, max_blocks_per_seq]";
  for (int s = 0; s < S; ++s) {
    LLM_CHECK(query_start[s] <= query_start[s + 1]) << "query_start not monotonic at " << s;
    LLM_CHECK(context_len[s] <= max_blocks_per_seq * block_size) << "context of seq " << s << " exceeds its blocks";
    for (int t = query_start[s]; t < query_start[s + 1]; ++t) {
      LLM_CHECK(positions[t] >= 0 && positions[t] < context_len[s]) << "position " << positions[t] << " outside context";
      int32_t blk = block_table[s * max_blocks_per_seq + positions[t] / block_size];
      LLM_CHECK(blk >= 0 && blk < num_blocks) << "block id " << blk << " out of range";
      LLM_CHECK(slot_mapping[t] == blk * block_size + positions[t] % block_size) << "slot_mapping disagrees with block_table";
    }
  }
  for (int32_t r : logits_rows) LLM_CHECK(r >= 0 && r < T) << "logits row " << r << " out of range";
  LLM_CHECK(exact_slot.empty() || int(exact_slot.size()) == S) << "exact_slot must be [S] or empty";
  for (int32_t e : exact_slot) LLM_CHECK(e >= -1) << "exact slot " << e << " out of range";
  LLM_CHECK(exact_copies.size() % 2 == 0) << "exact_copies must be (src, dst) pairs";
  for (int32_t e : exact_copies) LLM_CHECK(e >= 0) << "exact slot copy of slot " << e;
  LLM_CHECK(graph_context == 0 || (graph_context >= max_context_len() && graph_context <= max_blocks_per_seq * block_size))
      << "graph_context " << graph_context << " does not cover the plan";
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
  p.graph_context = plan.graph_context;
  p.micro_batches = 1;  // a micro-batch is not cut again
  return p;
}

BatchPlan pad_decode_plan(const BatchPlan& plan, int seqs, int graph_context, int block_size, int scratch_block) {
  LLM_CHECK(plan.decode_only() && seqs >= plan.num_seqs()) << "pad_decode_plan: not a decode step that fits";
  LLM_CHECK(graph_context >= plan.max_context_len() && graph_context % block_size == 0)
      << "pad_decode_plan: graph_context " << graph_context;
  const int S = plan.num_seqs(), width = graph_context / block_size;
  LLM_CHECK(width >= plan.max_blocks_per_seq) << "pad_decode_plan: block table wider than the graph context";
  BatchPlan p;
  p.token_ids = plan.token_ids;
  p.positions = plan.positions;
  p.slot_mapping = plan.slot_mapping;
  p.context_len = plan.context_len;
  p.token_ids.resize(seqs, 0);
  p.positions.resize(seqs, 0);
  p.slot_mapping.resize(seqs, scratch_block * block_size);
  p.context_len.resize(seqs, 1);
  p.query_start.resize(seqs + 1);
  for (int s = 0; s <= seqs; ++s) p.query_start[s] = s;
  p.max_blocks_per_seq = width;
  p.block_table.assign(size_t(seqs) * width, -1);
  for (int s = 0; s < S; ++s)
    std::copy_n(plan.block_table.begin() + int64_t(s) * plan.max_blocks_per_seq, plan.max_blocks_per_seq,
                p.block_table.begin() + int64_t(s) * width);
  for (int s = S; s < seqs; ++s) p.block_table[size_t(s) * width] = scratch_block;
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
