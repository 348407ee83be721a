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
}

}  // namespace llmctl
