#include "engine/sched/batch_builder.h"

#include <algorithm>

#include "engine/core/error.h"

namespace llmctl {

BatchPlan build_batch_plan(const SchedulerOutput& out, const Scheduler& sched) {
  const KvCacheManager& kv = sched.kv();
  const int B = kv.block_size();
  BatchPlan plan;
  plan.token_ids.reserve(out.num_tokens);
  plan.positions.reserve(out.num_tokens);
  plan.slot_mapping.reserve(out.num_tokens);
  for (const ScheduledSeq& s : out.seqs)
    plan.max_blocks_per_seq = std::max(plan.max_blocks_per_seq, int32_t(kv.block_table(s.seq_id).size()));
  for (const ScheduledSeq& s : out.seqs) {
    const Request& r = sched.request(s.seq_id);
    const std::vector<int32_t>& table = kv.block_table(s.seq_id);
    LLM_CHECK(s.start + s.num_new <= int(r.tokens.size()) && s.start + s.num_new <= int(table.size()) * B)
        << "scheduled tokens of request " << s.seq_id << " exceed its tokens or blocks";
    for (int p = s.start; p < s.start + s.num_new; ++p) {
      plan.token_ids.push_back(r.tokens[p]);
      plan.positions.push_back(p);
      plan.slot_mapping.push_back(table[p / B] * B + p % B);
    }
    plan.query_start.push_back(int32_t(plan.token_ids.size()));
    plan.context_len.push_back(s.start + s.num_new);
    plan.block_table.insert(plan.block_table.end(), table.begin(), table.end());
    plan.block_table.resize(plan.block_table.size() + (plan.max_blocks_per_seq - table.size()), -1);
    if (s.samples) plan.logits_rows.push_back(int32_t(plan.token_ids.size()) - 1);
  }
  LLM_CHECK(plan.num_tokens() == out.num_tokens) << "scheduler output counts " << out.num_tokens << " tokens, plan has "
                                                << plan.num_tokens();
  return plan;
}

}  // namespace llmctl
