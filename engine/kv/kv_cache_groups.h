// KvCacheGroups: the paged KV cache of a model whose layers differ in what they read, as one cache.
// Layers that attend to the whole context and sliding-window layers (Gemma 2 and 3, Qwen2 with
// max_window_layers) keep their KV in pools of their own, each with its own block table per sequence
// (a KvCacheManager each, as vLLM's hybrid allocator does): a sliding layer's pool holds only the
// blocks its window still reads, so its KV stops growing at the window.
//
// Groups, in order (kv_group_windows): group 0 holds the full-attention layers, group 1 the sliding
// ones; a model whose layers all read the whole context, or all slide with one window, has one group.
// Every group holds every sequence; each call below applies to all of them or, where it can fail,
// to none (allocate_prompt, ensure_capacity). A prefix-cache hit is the longest one every group can
// use (a sliding group needs only the blocks of the hit's window). Exact slots (fp8 open blocks) live
// in group 0: one per sequence, whatever its layers.
#pragma once
#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/kv/kv_cache_manager.h"

namespace llmctl {

// The windows of a model's KV groups, from its layers' windows (0: whole context): [0], [W] or [0, W].
// Throws when sliding layers disagree on their window.
std::vector<int> kv_group_windows(const std::vector<int>& layer_windows);

// The most blocks a sliding group of `window` holds at once: each of max_seqs running sequences its
// window plus its open and next block, and the blocks of one step's new tokens.
int kv_window_peak_blocks(int window, int block_size, int max_seqs, int max_batched_tokens);

// Blocks for each group of a cache given `bytes`, where a block of group g takes bytes_per_block[g].
// A sliding group gets what max_seqs sequences and one step of max_batched_tokens can hold at once,
// but never more blocks than a single pool for every layer would have; group 0 takes the rest.
std::vector<int> kv_group_blocks(const std::vector<int>& windows, const std::vector<double>& bytes_per_block,
                                 double bytes, int block_size, int max_seqs, int max_batched_tokens);

class KvCacheGroups {
 public:
  // One group per (num_blocks[g], windows[g]).
  KvCacheGroups(const std::vector<int>& num_blocks, const std::vector<int>& windows, int block_size = 16,
                bool enable_prefix_caching = true, bool exact_slots = false);

  int num_groups() const { return int(groups_.size()); }
  const KvCacheManager& group(int g) const { return groups_.at(size_t(g)); }
  int block_size() const { return groups_[0].block_size(); }
  bool prefix_caching() const { return groups_[0].prefix_caching(); }
  bool exact_slots() const { return groups_[0].exact_slots(); }
  int exact_slot(int64_t seq) const { return groups_[0].exact_slot(seq); }
  std::vector<int32_t> take_pending_exact_copies() { return groups_[0].take_pending_exact_copies(); }
  int blocks_for(int tokens) const { return groups_[0].blocks_for(tokens); }
  // Whether every group's pool can ever hold a sequence of `tokens` tokens computed `chunk` a step;
  // when not, `why` says which pool falls short.
  bool can_hold(int tokens, int chunk, std::string* why = nullptr) const;

  bool has(int64_t seq) const { return groups_[0].has(seq); }
  int num_seqs() const { return groups_[0].num_seqs(); }
  int num_computed(int64_t seq) const { return groups_[0].num_computed(seq); }
  const std::vector<int32_t>& block_table(int64_t seq, int group = 0) const {
    return groups_.at(size_t(group)).block_table(seq);
  }
  // Blocks the sequence's tables hold room for (its capacity in tokens / block_size).
  int table_blocks(int64_t seq) const { return int(groups_[0].block_table(seq).size()); }
  // Blocks the tightest group could hand out now.
  int num_available_blocks() const;

  // KvCacheManager's calls, over every group (see kv_cache_manager.h).
  [[nodiscard]] std::optional<int> allocate_prompt(int64_t seq, const std::vector<int32_t>& tokens,
                                                   bool use_cache = true, int max_new_tokens = INT_MAX);
  int peek_cached_tokens(const std::vector<int32_t>& tokens) const;
  [[nodiscard]] bool ensure_capacity(int64_t seq, int total_tokens);
  void commit_tokens(int64_t seq, const std::vector<int32_t>& tokens, int num_computed);
  void truncate(int64_t seq, int n);
  void fork(int64_t parent, int64_t child);
  void free(int64_t seq);
  // Copy-on-write copies recorded since the last call, per group (one list per group).
  std::vector<std::vector<std::pair<int, int>>> take_pending_copies();

  // Sums over the groups (prefix-cache counts are group 0's: every group takes the same hits).
  KvCacheStats stats() const;
  // Each group's invariants, and that every group holds the same sequences with the same counts.
  void check_invariants() const;

 private:
  int agreed_hit_blocks(const std::vector<int32_t>& tokens) const;
  std::vector<KvCacheManager> groups_;
};

}  // namespace llmctl
