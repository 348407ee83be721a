// BlockPool: fixed-size KV blocks handed out by id, with reference counts and a free list.
// Block states: free -> in use (ref >= 1) -> free when the last reference is dropped.
#pragma once
#include <cstdint>
#include <vector>

namespace llmctl {

class BlockPool {
 public:
  explicit BlockPool(int num_blocks);

  int num_blocks() const { return int(ref_.size()); }
  int num_free() const { return int(free_.size()); }
  int ref_count(int id) const { return ref_.at(id); }

  [[nodiscard]] int allocate();  // free -> in use (ref 1); -1 when none is free
  void retain(int id);           // ref += 1 (shared by another table)
  void release(int id);          // ref -= 1; -> free at 0

 private:
  std::vector<int> ref_;
  std::vector<int> free_;  // stack of free ids, lowest id on top first
};

}  // namespace llmctl
