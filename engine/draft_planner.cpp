#include "engine/draft_planner.h"

#include <algorithm>

namespace llmctl {

void propose_drafts(Scheduler& sched, const Proposer& proposer, std::vector<int64_t> decoding, const DraftLimits& limits) {
  std::sort(decoding.begin(), decoding.end());  // sequence ids grow with submission: oldest first
  // Every decoding sequence keeps its one token in the step; drafts take what is left of the budget.
  int budget = limits.max_batched_tokens - int(std::min<size_t>(decoding.size(), size_t(limits.max_seqs)));
  // Drafts only take KV blocks that no decoding sequence needs for its own next token (one each at
  // most).
  const KvCacheGroups& kv = sched.kv();
  int spare_blocks = kv.num_available_blocks() - int(decoding.size());
  for (int64_t seq_id : decoding) {
    const Sequence& q = sched.sequence(seq_id);
    // The step writes positions [N - 1, N - 1 + d]: N + d slots. The table holds `held` blocks; the
    // sequence's own token needs blocks_for(N), the drafts what lies beyond.
    const int n = int(q.tokens.size()), B = kv.block_size();
    const int own_blocks = std::max(kv.table_blocks(seq_id), kv.blocks_for(n));
    const int slot_room = (own_blocks + std::max(spare_blocks, 0)) * B - n;
    // Drafts + the token after them stay within max_tokens (max_total_tokens).
    const int room = std::min({limits.k, budget, q.max_total_tokens - n - 1, slot_room});
    if (room <= 0) continue;
    std::vector<int32_t> drafts = proposer.propose(q.tokens, room);
    if (int(drafts.size()) > room) drafts.resize(size_t(room));
    // An id that can never be drawn is never accepted: the drafts end before it.
    auto bad = std::find_if(drafts.begin(), drafts.end(), [&](int32_t t) { return t < 0 || t >= limits.sample_vocab; });
    drafts.erase(bad, drafts.end());
    if (drafts.empty()) continue;
    sched.append_draft(seq_id, drafts);
    budget -= int(drafts.size());
    spare_blocks -= kv.blocks_for(n + int(drafts.size())) - own_blocks;
  }
}

}  // namespace llmctl
