#include "engine/sched/batch_builder.h"

#include <algorithm>

#include "engine/core/error.h"

namespace llmctl {

std::vector<int32_t> sampling_rows(const SchedulerOutput& out) {
  std::vector<int32_t> rows;
  int32_t end = 0;  // one past the sequence's last row
  for (const ScheduledSeq& s : out.seqs) {
    end += s.num_new;
    if (!s.samples) continue;
    for (int k = s.num_draft; k >= 0; --k) rows.push_back(end - 1 - k);
  }
  return rows;
}

BatchPlan build_batch_plan(const SchedulerOutput& out, const Scheduler& sched) {
  return build_batch_plan(out, sched, sampling_rows(out));
}

namespace {
// Slots of the new tokens and the block table rows of every scheduled sequence in one KV group.
void add_tables(const SchedulerOutput& out, const KvCacheManager& kv, std::vector<int32_t>& slots,
                std::vector<int32_t>& tables, int32_t& width) {
  const int B = kv.block_size();
  width = 0;
  for (const ScheduledSeq& s : out.seqs) width = std::max(width, int32_t(kv.block_table(s.seq_id).size()));
  slots.reserve(size_t(out.num_tokens));
  tables.reserve(out.seqs.size() * size_t(width));
  for (const ScheduledSeq& s : out.seqs) {
    const std::vector<int32_t>& table = kv.block_table(s.seq_id);
    LLM_CHECK(s.start + s.num_new <= int(table.size()) * B) << "scheduled tokens of request " << s.seq_id
                                                            << " exceed its blocks";
    for (int p = s.start; p < s.start + s.num_new; ++p) slots.push_back(kv.slot(s.seq_id, p));
    tables.insert(tables.end(), table.begin(), table.end());
    tables.resize(tables.size() + (size_t(width) - table.size()), -1);
  }
}
}  // namespace

BatchPlan build_batch_plan(const SchedulerOutput& out, const Scheduler& sched, std::vector<int32_t> logits_rows) {
  const KvCacheGroups& kv = sched.kv();
  BatchPlan plan;
  plan.token_ids.reserve(out.num_tokens);
  plan.positions.reserve(out.num_tokens);
  for (const ScheduledSeq& s : out.seqs) {
    const Sequence& r = sched.sequence(s.seq_id);
    LLM_CHECK(s.start + s.num_new <= int(r.tokens.size())) << "scheduled tokens of request " << s.seq_id
                                                           << " exceed its tokens";
    for (int p = s.start; p < s.start + s.num_new; ++p) {
      plan.token_ids.push_back(r.tokens[p]);
      plan.positions.push_back(p);
    }
    plan.query_start.push_back(int32_t(plan.token_ids.size()));
    plan.context_len.push_back(s.start + s.num_new);
    if (kv.exact_slots()) plan.exact_slot.push_back(kv.exact_slot(s.seq_id));
  }
  add_tables(out, kv.group(0), plan.slot_mapping, plan.block_table, plan.max_blocks_per_seq);
  if (kv.num_groups() > 1)
    add_tables(out, kv.group(1), plan.window_slot_mapping, plan.window_block_table, plan.window_max_blocks_per_seq);
  plan.exact_copies = out.exact_copies;
  LLM_CHECK(plan.num_tokens() == out.num_tokens) << "scheduler output counts " << out.num_tokens << " tokens, plan has "
                                                << plan.num_tokens();
  for (size_t i = 0; i < logits_rows.size(); ++i)
    LLM_CHECK(logits_rows[i] >= 0 && logits_rows[i] < out.num_tokens && (i == 0 || logits_rows[i - 1] < logits_rows[i]))
        << "logits row " << logits_rows[i] << " is out of order or outside the step's " << out.num_tokens << " rows";
  plan.logits_rows = std::move(logits_rows);
  return plan;
}

}  // namespace llmctl
