#include "engine/kv/block_pool.h"

#include <algorithm>

#include "engine/core/error.h"
#include "engine/core/hash.h"

namespace llmctl {

uint64_t BlockPool::hash_block(uint64_t parent, std::span<const int32_t> tokens) {
  uint64_t h = mix64(parent + 0x9e3779b97f4a7c15ULL);
  for (int32_t t : tokens) h = mix64(h + 0x9e3779b97f4a7c15ULL + uint64_t(uint32_t(t)));
  return mix64(h ^ uint64_t(tokens.size()));
}

BlockPool::BlockPool(int num_blocks) {
  LLM_CHECK(num_blocks > 0) << "a block pool needs at least one block";
  blocks_.resize(num_blocks);
  for (int i = num_blocks - 1; i >= 0; --i) free_.push_back(i);
}

void BlockPool::drop_hash(Block& b) {
  auto it = by_hash_.find(b.hash);
  LLM_CHECK(it != by_hash_.end() && &blocks_[it->second] == &b) << "prefix map lost a hashed block";
  by_hash_.erase(it);
  b.hashed = false;
  b.hash = b.parent = 0;
  b.tokens.clear();
}

int BlockPool::allocate() {
  int id = -1;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    id = lru_.front();  // least recently released
    lru_.pop_front();
    drop_hash(blocks_[id]);
    ++stats_.evictions;
  } else {
    ++stats_.failed_allocations;
    return -1;
  }
  LLM_CHECK(blocks_[id].ref == 0 && !blocks_[id].hashed) << "allocated block " << id << " was not blank";
  blocks_[id].ref = 1;
  ++stats_.allocations;
  return id;
}

void BlockPool::retain(int id) {
  Block& b = blocks_.at(id);
  if (b.ref == 0) {
    LLM_CHECK(b.hashed) << "retain of free block " << id;
    lru_.erase(b.lru_pos);  // cached -> in use
    ++stats_.cache_revivals;
  }
  ++b.ref;
}

void BlockPool::release(int id) {
  Block& b = blocks_.at(id);
  LLM_CHECK(b.ref > 0) << "release of unreferenced block " << id;
  if (--b.ref > 0) return;
  if (b.hashed) {
    b.lru_pos = lru_.insert(lru_.end(), id);  // in use -> cached
  } else {
    free_.push_back(id);  // in use -> free
  }
}

int BlockPool::find(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens) const {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return -1;
  const Block& b = blocks_[it->second];
  if (b.parent != parent || !std::equal(b.tokens.begin(), b.tokens.end(), tokens.begin(), tokens.end()))
    return -1;  // a hash collision: different content
  return it->second;
}

bool BlockPool::register_full(int id, uint64_t hash, uint64_t parent, std::span<const int32_t> tokens) {
  Block& b = blocks_.at(id);
  LLM_CHECK(b.ref > 0) << "register_full of unreferenced block " << id;
  if (b.hashed) {
    LLM_CHECK(b.hash == hash) << "block " << id << " registered under two hashes";
    return true;
  }
  if (by_hash_.count(hash)) return false;  // same content (or a collision) already cached elsewhere
  b.hashed = true;
  b.hash = hash;
  b.parent = parent;
  b.tokens.assign(tokens.begin(), tokens.end());
  by_hash_.emplace(hash, id);
  return true;
}

void BlockPool::check_invariants() const {
  const int n = num_blocks();
  std::vector<char> seen(n, 0);
  for (int id : free_) {
    LLM_CHECK(id >= 0 && id < n && !seen[id]) << "free list holds block " << id << " twice or out of range";
    seen[id] = 1;
    LLM_CHECK(blocks_[id].ref == 0 && !blocks_[id].hashed) << "free block " << id << " is referenced or hashed";
  }
  for (int id : lru_) {
    LLM_CHECK(id >= 0 && id < n && !seen[id]) << "LRU holds block " << id << " twice or also free";
    seen[id] = 2;
    LLM_CHECK(blocks_[id].ref == 0 && blocks_[id].hashed) << "cached block " << id << " is referenced or unhashed";
  }
  int hashed = 0;
  for (int id = 0; id < n; ++id) {
    const Block& b = blocks_[id];
    LLM_CHECK(b.ref >= 0) << "negative ref count on block " << id;
    LLM_CHECK(seen[id] || b.ref > 0) << "block " << id << " is neither free, cached nor in use";
    if (b.hashed) {
      ++hashed;
      auto it = by_hash_.find(b.hash);
      LLM_CHECK(it != by_hash_.end() && it->second == id) << "hashed block " << id << " missing from the prefix map";
      LLM_CHECK(hash_block(b.parent, b.tokens) == b.hash) << "block " << id << " hash disagrees with its tokens";
    }
  }
  LLM_CHECK(hashed == int(by_hash_.size())) << "prefix map has entries for unhashed blocks";
  LLM_CHECK(num_free() + num_in_use() + num_cached() == n) << "free + in use + cached != total";
}

}  // namespace llmctl
