#include "engine/kv/kv_cache_groups.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/core/error.h"

namespace llmctl {

std::vector<int> kv_group_windows(const std::vector<int>& layer_windows) {
  LLM_CHECK(!layer_windows.empty()) << "a model without layers";
  bool full = false;
  int window = 0;
  for (int w : layer_windows) {
    LLM_CHECK(w >= 0) << "a layer window of " << w << " tokens";
    if (w == 0) {
      full = true;
      continue;
    }
    LLM_CHECK(window == 0 || window == w) << "sliding layers with windows of " << window << " and " << w
                                          << " tokens (one window per model)";
    window = w;
  }
  if (window == 0) return {0};
  if (!full) return {window};
  return {0, window};
}

int kv_window_peak_blocks(int window, int block_size, int max_seqs, int max_batched_tokens) {
  auto blocks = [&](int64_t tokens) { return (tokens + block_size - 1) / block_size; };
  const int64_t peak = int64_t(max_seqs) * (blocks(window) + 2) + blocks(max_batched_tokens);
  return int(std::min<int64_t>(peak, 1 << 30));
}

std::vector<int> kv_group_blocks(const std::vector<int>& windows, const std::vector<double>& bytes_per_block,
                                 double bytes, int block_size, int max_seqs, int max_batched_tokens) {
  LLM_CHECK(!windows.empty() && windows.size() == bytes_per_block.size() && windows.size() <= 2)
      << "KV groups: " << windows.size() << " windows, " << bytes_per_block.size() << " block sizes";
  double all = 0;  // a block of every layer
  for (double b : bytes_per_block) all += b;
  LLM_CHECK(all > 0) << "KV blocks of " << all << " bytes";
  auto clamp_blocks = [](double n) { return int(std::clamp(std::floor(n), 0.0, 1e9)); };
  const int single = clamp_blocks(bytes / all);  // one pool: every layer holds every block
  if (windows.size() == 1) return {clamp_blocks(bytes / bytes_per_block[0])};
  const int sliding = std::min(single, kv_window_peak_blocks(windows[1], block_size, max_seqs, max_batched_tokens));
  const int full = clamp_blocks((bytes - double(sliding) * bytes_per_block[1]) / bytes_per_block[0]);
  return {full, sliding};
}

KvCacheGroups::KvCacheGroups(const std::vector<int>& num_blocks, const std::vector<int>& windows, int block_size,
                             bool enable_prefix_caching, bool exact_slots) {
  LLM_CHECK(!num_blocks.empty() && num_blocks.size() == windows.size() && windows.size() <= 2)
      << "KV groups: " << num_blocks.size() << " block counts for " << windows.size() << " windows";
  LLM_CHECK(windows.size() == 1 || windows[0] == 0) << "group 0 of two is the full-attention one";
  groups_.reserve(windows.size());
  for (size_t g = 0; g < windows.size(); ++g)  // exact slots: group 0 only
    groups_.emplace_back(num_blocks[g], block_size, enable_prefix_caching, exact_slots && g == 0, windows[g]);
}

bool KvCacheGroups::can_hold(int tokens, int chunk, std::string* why) const {
  for (size_t g = 0; g < groups_.size(); ++g) {
    const int need = groups_[g].max_blocks_held(tokens, chunk), have = groups_[g].num_blocks();
    if (need <= have) continue;
    if (why)
      *why = std::to_string(need) + " KV blocks" +
             (groups_[g].window() > 0 ? " of the sliding-window layers' pool" : std::string()) +
             ", but the cache holds " + std::to_string(have);
    return false;
  }
  return true;
}

int KvCacheGroups::num_available_blocks() const {
  int n = groups_[0].num_available_blocks();
  for (const KvCacheManager& g : groups_) n = std::min(n, g.num_available_blocks());
  return n;
}

// Group 0's longest hit, then the longest a sliding group can use within it (its hits need not be a
// prefix: a shorter hit needs other blocks). Group 0 either has no window (its hits are prefixes, so
// any shorter count is one too) or is the only group.
int KvCacheGroups::agreed_hit_blocks(const std::vector<int32_t>& tokens) const {
  int hit = groups_[0].cached_blocks(tokens);
  for (size_t g = 1; g < groups_.size(); ++g) hit = groups_[g].cached_blocks(tokens, hit);
  return hit;
}

std::optional<int> KvCacheGroups::allocate_prompt(int64_t seq, const std::vector<int32_t>& tokens, bool use_cache,
                                                  int max_new_tokens) {
  if (groups_.size() == 1) return groups_[0].allocate_prompt(seq, tokens, use_cache, max_new_tokens);
  LLM_CHECK(!has(seq)) << "sequence " << seq << " already holds blocks";
  const int hit = use_cache && prefix_caching() ? agreed_hit_blocks(tokens) : 0;
  for (const KvCacheManager& g : groups_)
    if (!g.can_allocate_prompt(tokens, use_cache, max_new_tokens, hit)) return std::nullopt;
  std::optional<int> computed;
  for (KvCacheManager& g : groups_) {
    const std::optional<int> c = g.allocate_prompt(seq, tokens, use_cache, max_new_tokens, hit);
    LLM_CHECK(c && (!computed || *c == *computed)) << "KV groups disagree on the prompt of sequence " << seq;
    computed = c;
  }
  return computed;
}

int KvCacheGroups::peek_cached_tokens(const std::vector<int32_t>& tokens) const {
  if (groups_.size() == 1) return groups_[0].peek_cached_tokens(tokens);
  if (tokens.empty()) return 0;
  return groups_[0].peek_cached_tokens(tokens, agreed_hit_blocks(tokens));
}

bool KvCacheGroups::ensure_capacity(int64_t seq, int total_tokens) {
  if (groups_.size() == 1) return groups_[0].ensure_capacity(seq, total_tokens);  // itself all or nothing
  for (const KvCacheManager& g : groups_)
    if (g.blocks_to_ensure(seq, total_tokens) > g.num_available_blocks()) return false;
  for (KvCacheManager& g : groups_)
    LLM_CHECK(g.ensure_capacity(seq, total_tokens)) << "KV group ran dry after its capacity was checked";
  return true;
}

void KvCacheGroups::commit_tokens(int64_t seq, const std::vector<int32_t>& tokens, int num_computed) {
  for (KvCacheManager& g : groups_) g.commit_tokens(seq, tokens, num_computed);
}

void KvCacheGroups::truncate(int64_t seq, int n) {
  for (KvCacheManager& g : groups_) g.truncate(seq, n);
}

void KvCacheGroups::fork(int64_t parent, int64_t child) {
  for (KvCacheManager& g : groups_) g.fork(parent, child);
}

void KvCacheGroups::free(int64_t seq) {
  for (KvCacheManager& g : groups_) g.free(seq);
}

std::vector<std::vector<std::pair<int, int>>> KvCacheGroups::take_pending_copies() {
  std::vector<std::vector<std::pair<int, int>>> out;
  for (KvCacheManager& g : groups_) out.push_back(g.take_pending_copies());
  return out;
}

KvCacheStats KvCacheGroups::stats() const {
  KvCacheStats st = groups_[0].stats();
  for (size_t g = 1; g < groups_.size(); ++g) {
    const KvCacheStats o = groups_[g].stats();
    st.total_blocks += o.total_blocks;
    st.used_blocks += o.used_blocks;
    st.cached_blocks += o.cached_blocks;
    st.free_blocks += o.free_blocks;
    st.allocated_slots += o.allocated_slots;
    st.filled_slots += o.filled_slots;
    st.cow_copies += o.cow_copies;
    st.evictions += o.evictions;
  }
  st.usage = st.total_blocks ? double(st.used_blocks) / st.total_blocks : 0.0;
  st.waste = st.allocated_slots ? double(st.allocated_slots - st.filled_slots) / double(st.allocated_slots) : 0.0;
  return st;
}

void KvCacheGroups::check_invariants() const {
  for (const KvCacheManager& g : groups_) {
    g.check_invariants();
    LLM_CHECK(g.num_seqs() == groups_[0].num_seqs()) << "KV groups hold different sequences";
  }
}

}  // namespace llmctl
