// KvCacheManager: per-sequence block tables over one BlockPool, with prefix caching and copy-on-write.
// Policy-free: it never decides who runs; the Scheduler asks it for blocks and tells it what was computed.
//
// Per sequence (id: int64):
//   table         [nb]   physical block ids; token position p lives in slot table[p / B] * B + p % B
//   num_computed         tokens whose KV is in the cache (positions [0, num_computed))
//   hashes        [nh]   chain hashes of the leading full blocks already registered or found (nh <= nb)
//
// Life of a sequence:
//   allocate_prompt (or fork) -> { ensure_capacity -> (engine writes KV) -> [truncate] -> commit_tokens }* -> free
// Rollback (speculative tokens rejected): truncate(seq, n) forgets positions [n, ...) before they are
// committed, so a rejected token is never part of a hashed (shareable) block.
// Sharing: full computed blocks are registered in the pool's prefix map by commit_tokens; a later
// allocate_prompt with the same prefix retains them instead of computing them again. fork() shares
// all blocks of the parent. A block is written only by the one table that holds it, and never once it
// is hashed (full and computed): ensure_capacity
// copies a shared or hashed block before the first write into it (copy-on-write) and records (src, dst); the
// engine must copy those blocks' KV (every layer, all B slots) before the next forward step.
// Freed sequences release blocks tail first, so the tail of a cached chain is evicted before its head.
// Exact slots (exact_slots on: an fp8 cache keeping each sequence's open block exact, engine/backend/
// kv_exact_rows.h): every sequence holds a slot (the lowest free one) from allocate_prompt or fork
// until free; a fork's child slot is recorded as a copy of its parent's (take_pending_exact_copies).
// A sequence then always starts computing at a block boundary, so its slot only ever serves rows it
// wrote itself: a whole cached prompt gives up its last block, computed again, not just its last token.
// Sliding window (window W > 0: the cache of layers whose token at p reads keys (p - W, p] only): once
// a sequence has computed c tokens, its blocks wholly before position c - W + 1 are never read again;
// commit_tokens releases them (a hashed one stays findable) and their table entries become kDropped.
// Blocks [0, dropped) of a table are dropped, the rest are held. A prefix-cache hit of L tokens then
// needs only the blocks from position L - W on (first_needed_block); the ones before are dropped too.
#pragma once
#include <climits>
#include <cstdint>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/kv/block_pool.h"

namespace llmctl {

struct KvCacheStats {
  int total_blocks = 0;
  int used_blocks = 0;    // referenced by at least one table
  int cached_blocks = 0;  // ref 0 but findable (evictable)
  int free_blocks = 0;
  double usage = 0;       // used_blocks / total_blocks
  int64_t prompt_tokens_looked_up = 0;  // sum of prompt lengths over successful allocate_prompt calls
  int64_t prompt_tokens_cached = 0;     // sum of the counts those calls returned (tokens not computed)
  double prefix_hit_rate = 0;           // cached / looked up (0 when nothing looked up)
  int64_t allocated_slots = 0;          // used_blocks * block_size
  int64_t filled_slots = 0;             // slots holding a computed token (shared blocks counted once)
  double waste = 0;                     // (allocated - filled) / allocated (0 when nothing allocated)
  int64_t cow_copies = 0;               // copy-on-write block copies recorded
  int64_t evictions = 0;                // cached blocks recycled by the pool
};

class KvCacheManager {
 public:
  static constexpr int32_t kDropped = -1;  // a table entry a sliding window no longer reads

  KvCacheManager(int num_blocks, int block_size = 16, bool enable_prefix_caching = true, bool exact_slots = false,
                 int window = 0);

  int block_size() const { return block_size_; }
  int window() const { return window_; }  // 0: every block stays while its sequence lives
  int num_blocks() const { return pool_.num_blocks(); }
  bool prefix_caching() const { return prefix_caching_; }
  bool exact_slots() const { return exact_slots_; }
  // The sequence's exact slot (-1 without exact slots).
  int exact_slot(int64_t seq) const { return get(seq).exact_slot; }
  // (src, dst) exact slot copies recorded by fork since the last call, flattened, in order.
  std::vector<int32_t> take_pending_exact_copies();
  const BlockPool& pool() const { return pool_; }
  int blocks_for(int tokens) const { return (tokens + block_size_ - 1) / block_size_; }

  bool has(int64_t seq) const { return seqs_.count(seq) > 0; }
  // Starts `seq` for `tokens` (a prompt, or prompt + generated tokens on recompute): retains the longest
  // chain of cached full blocks matching the prefix, allocates blocks for the next max_new_tokens. Returns
  // how many leading tokens are already computed (from the cache). Never all of them: with the whole
  // prompt cached it returns n - 1 (the last token is computed again to get logits) and the last
  // block is copied into a private block first (a pending copy): a hashed block is never written. nullopt, with nothing held, when the pool lacks
  // blocks. Throws if `seq` already exists or tokens is empty.
  // use_cache false: no prefix-cache hits (every prompt token is computed, e.g. for prompt
  // logprobs); its blocks are still registered for others once computed.
  // max_new_tokens: blocks are allocated for the cached prefix plus this many tokens (the first
  // prefill chunk), not for the whole prompt.
  // max_cached_blocks: hits use at most that many leading full blocks (a cache of several groups
  // agrees on one count, engine/kv/kv_cache_groups.h).
  [[nodiscard]] std::optional<int> allocate_prompt(int64_t seq, const std::vector<int32_t>& tokens,
                                                   bool use_cache = true, int max_new_tokens = INT_MAX,
                                                   int max_cached_blocks = INT_MAX);
  // Whether allocate_prompt would get its blocks now; changes nothing.
  bool can_allocate_prompt(const std::vector<int32_t>& tokens, bool use_cache = true, int max_new_tokens = INT_MAX,
                           int max_cached_blocks = INT_MAX) const;
  // What allocate_prompt would return for `tokens` now (if it got its blocks); changes nothing.
  int peek_cached_tokens(const std::vector<int32_t>& tokens, int max_cached_blocks = INT_MAX) const;
  // Full blocks of `tokens` a prefix-cache hit can use now (at most max_blocks): the hit allocate_prompt
  // takes before its whole-prompt rule (with exact slots, never every token of the prompt).
  int cached_blocks(const std::vector<int32_t>& tokens, int max_blocks = INT_MAX) const;
  // The first block a sequence that has computed `computed` tokens still reads (0 without a window).
  int first_needed_block(int computed) const;
  // Blocks a sequence of `tokens` tokens, computed `chunk` tokens a step, holds at most.
  int max_blocks_held(int tokens, int chunk) const;
  // Makes `seq` able to hold `total_tokens` and to write positions [num_computed, total_tokens): allocates
  // missing blocks and copies shared or hashed blocks in that range (copy-on-write; a hashed block in
  // that range exists only after a truncate). false, with nothing changed, when the pool cannot supply
  // the blocks.
  [[nodiscard]] bool ensure_capacity(int64_t seq, int total_tokens);
  // The blocks ensure_capacity would take from the pool (new ones and copies); changes nothing.
  int blocks_to_ensure(int64_t seq, int total_tokens) const;
  // Records that positions [0, num_computed) of `seq` are in the cache; `tokens` holds at least those.
  // With prefix caching on, newly completed full blocks get their chained hash and become shareable.
  void commit_tokens(int64_t seq, const std::vector<int32_t>& tokens, int num_computed);
  // With a window, blocks that left it are released (see the header).
  // Rollback: `seq` keeps positions [0, n) only. num_computed becomes min(num_computed, n); blocks past
  // the blocks_for(n) first are released (tail first: a cached one stays findable, its content is
  // right for its hash); hashes of blocks past the n / B full ones are forgotten by this table. The
  // block holding position n stays; if it is shared or hashed, the next ensure_capacity copies it
  // before writing (a copied-on-write block is never written in place). Pending copies into released
  // blocks are dropped. Call it before commit_tokens for the step whose tokens were rejected. With a
  // window, n must not reach back into the blocks it released.
  void truncate(int64_t seq, int n);
  // `child` (new) shares every block of `parent` and its computed tokens; the first write into a
  // shared block makes a private copy (see ensure_capacity).
  void fork(int64_t parent, int64_t child);
  // Drops the sequence's references (tail first). Cached full blocks stay findable. Unknown seq: no-op.
  void free(int64_t seq);

  const std::vector<int32_t>& block_table(int64_t seq) const { return get(seq).table; }
  int num_computed(int64_t seq) const { return get(seq).num_computed; }
  int slot(int64_t seq, int position) const;
  // Copies (src block, dst block) recorded since the last call, in order; the engine performs them
  // before the next forward. Copies whose dst was freed meanwhile are dropped.
  std::vector<std::pair<int, int>> take_pending_copies();
  // Blocks the pool could hand out now (free + evictable cached).
  int num_available_blocks() const { return pool_.num_available(); }
  int num_seqs() const { return int(seqs_.size()); }

  KvCacheStats stats() const;
  // Throws Error unless: pool invariants hold; each block's ref count equals the number of table
  // entries holding it; no table holds a block twice; a block in two tables is hashed (prefix sharing)
  // or shared within one fork family; tables cover their computed tokens; a table's hashes cover only
  // blocks holding computed tokens.
  void check_invariants() const;

 private:
  struct Seq {
    std::vector<int32_t> table;
    std::vector<uint64_t> hashes;
    int num_computed = 0;
    int64_t family = 0;  // fork family (the id of the root sequence): sharing without a hash is legal inside it
    int exact_slot = -1;
    int dropped = 0;  // table[0, dropped) are kDropped (a sliding window released them)
  };
  void drop_passed_blocks(Seq& s);  // the blocks a window no longer reads
  std::vector<int> shared_in_range(const Seq& s, int total_tokens) const;
  // What allocate_prompt would do: its hits, the tokens they cover, the table length, and whether
  // the pool has the blocks.
  struct PromptPlan {
    std::vector<int> hits;
    std::vector<uint64_t> hashes;
    int computed = 0, num_blocks = 0;
    bool cow_last = false, fits = false;
  };
  PromptPlan plan_prompt(const std::vector<int32_t>& tokens, bool use_cache, int max_new_tokens,
                         int max_cached_blocks) const;
  int take_exact_slot();  // the lowest free one (-1 without exact slots)
  const Seq& get(int64_t seq) const;
  Seq& get(int64_t seq);
  void drop(int id);  // release one reference; forget pending copies into a block that became free
  int copy_on_write(Seq& s, int index);
  // The longest usable hit of at most max_blocks cached full blocks matching the prefix of tokens:
  // block ids (kDropped for those before the window's first needed one) and chain hashes.
  void match_prefix(const std::vector<int32_t>& tokens, int max_blocks, std::vector<int>& hits,
                    std::vector<uint64_t>& hashes) const;

  BlockPool pool_;
  int block_size_;
  bool prefix_caching_;
  bool exact_slots_;
  int window_;
  std::set<int> free_exact_slots_;  // below next_exact_slot_
  int next_exact_slot_ = 0;
  std::vector<int32_t> pending_exact_copies_;
  std::unordered_map<int64_t, Seq> seqs_;
  std::vector<std::pair<int, int>> pending_copies_;
  int64_t lookup_tokens_ = 0, cached_tokens_ = 0, cow_copies_ = 0;
};

}  // namespace llmctl
