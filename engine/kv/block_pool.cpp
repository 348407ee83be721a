#include "engine/kv/block_pool.h"

#include "engine/core/error.h"

namespace llmctl {

BlockPool::BlockPool(int num_blocks) : ref_(num_blocks, 0) {
  LLM_CHECK(num_blocks > 0) << "a block pool needs at least one block";
  for (int i = num_blocks - 1; i >= 0; --i) free_.push_back(i);
}

int BlockPool::allocate() {
  if (free_.empty()) return -1;
  int id = free_.back();
  free_.pop_back();
  ref_[id] = 1;
  return id;
}

void BlockPool::retain(int id) {
  LLM_CHECK(ref_.at(id) > 0) << "retain of free block " << id;
  ++ref_[id];
}

void BlockPool::release(int id) {
  LLM_CHECK(ref_.at(id) > 0) << "release of free block " << id;
  if (--ref_[id] == 0) free_.push_back(id);
}

}  // namespace llmctl
