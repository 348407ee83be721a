// BlockPool: fixed-size KV blocks handed out by id, with reference counts, a free list, a prefix map
// from chained block hashes to blocks, and LRU eviction of unreferenced cached blocks.
// The pool knows nothing about sequences or block size; KvCacheManager owns the block tables.
//
// Block states (each block is in exactly one):
//   free    ref 0, no hash, on the free list
//   in use  ref >= 1 (held by one or more block tables); may carry a hash once it is full and computed
//   cached  ref 0, has a hash, on the LRU list: still findable by find(), its KV content is kept
// Transitions:
//   free   -> in use    allocate()                       (ref 1)
//   cached -> in use    allocate() when no block is free (evicts the least recently released cached
//                       block: its hash leaves the prefix map; the block is handed out blank)
//   cached -> in use    retain() of a block found by find()  (a prefix-cache hit; leaves the LRU)
//   in use -> in use    retain() / release() while ref stays >= 1; register_full() adds a hash
//   in use -> free      release() to ref 0 of a block without hash
//   in use -> cached    release() to ref 0 of a block with hash (becomes the most recent in the LRU)
//
// Prefix map: key = hash_block(parent_hash, tokens of the full block), chained from kRootHash for the
// first block of a sequence. A lookup compares the stored parent hash and token ids too, so a 64-bit
// collision of two different blocks never returns the wrong block; the chain itself relies on parent
// hashes (an exact parent hash match with different earlier content needs a 64-bit collision).
// One block per hash: registering a second block with the same content leaves it unhashed.
//
// Invariant: num_free() + num_in_use() + num_cached() == num_blocks().
#pragma once
#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

namespace llmctl {

struct BlockPoolStats {
  int64_t allocations = 0;  // allocate() calls that returned a block
  int64_t evictions = 0;    // cached blocks recycled by allocate()
  int64_t cache_revivals = 0;  // cached (ref 0) blocks brought back by retain()
  int64_t failed_allocations = 0;  // allocate() calls that returned -1
};

class BlockPool {
 public:
  static constexpr uint64_t kRootHash = 0x6c6c6d63746c6b76ULL;  // parent hash of a sequence's first block

  explicit BlockPool(int num_blocks);

  int num_blocks() const { return int(blocks_.size()); }
  int num_free() const { return int(free_.size()); }       // plain free blocks
  int num_cached() const { return int(lru_.size()); }      // ref 0, findable, evictable
  int num_in_use() const { return num_blocks() - num_free() - num_cached(); }
  int num_available() const { return num_free() + num_cached(); }  // what allocate() can still hand out
  int ref_count(int id) const { return blocks_.at(id).ref; }
  bool is_hashed(int id) const { return blocks_.at(id).hashed; }
  bool is_cached(int id) const { return blocks_.at(id).ref == 0 && blocks_.at(id).hashed; }
  const BlockPoolStats& stats() const { return stats_; }

  // free/cached -> in use (ref 1). Takes a plain free block first (lowest id first); otherwise evicts
  // the least recently released cached block. -1 when nothing is free or evictable.
  [[nodiscard]] int allocate();
  // ref += 1. A cached block (ref 0, found by find()) comes back in use. Retaining a free block throws.
  void retain(int id);
  // ref -= 1; at 0 the block becomes free (no hash) or cached (hash; most recently used end of the LRU).
  void release(int id);

  // The block holding exactly (parent, tokens) under `hash`, in use or cached; -1 if none. No ref change.
  int find(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens) const;
  // Gives an in-use full block its hash so find() can return it. Returns false (and leaves the block
  // unhashed) when another block already holds that hash. A block hashed twice must get the same hash.
  bool register_full(int id, uint64_t hash, uint64_t parent, std::span<const int32_t> tokens);

  // Chained 64-bit hash of a block: splitmix64-style mixing of the parent hash and each token id.
  static uint64_t hash_block(uint64_t parent, std::span<const int32_t> tokens);

  // Throws Error if the state lists, ref counts and the prefix map disagree.
  void check_invariants() const;

 private:
  struct Block {
    int ref = 0;
    bool hashed = false;
    uint64_t hash = 0, parent = 0;
    std::vector<int32_t> tokens;          // the full block's token ids, kept while hashed
    std::list<int>::iterator lru_pos;     // valid while cached
  };
  void drop_hash(Block& b);

  std::vector<Block> blocks_;
  std::vector<int> free_;                 // stack of free ids, lowest id on top first
  std::list<int> lru_;                    // cached ids, least recently released first
  std::unordered_map<uint64_t, int> by_hash_;
  BlockPoolStats stats_;
};

}  // namespace llmctl
