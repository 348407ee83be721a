// KvExactRows: full-precision (f32) k and v rows of each running sequence's open block, kept beside
// an fp8 cache so that a query reads its own block exact and the rest of its context in fp8. Most of
// fp8's error on small models sits in the few most recent positions (docs/PERFORMANCE.md); the rule
// "key j is exact iff j is in the query's block" depends on positions only, so a result does not
// depend on how a prompt was chunked, batched or speculated.
//
// One store per layer, grown as slots appear:
//   k, v   [slots, R * B, Hkv, D] f32 in host memory (the CPU backend); slot e holds position p at
//          row (p / B % R) * B + p % B
//   k_dev, v_dev  the same rows in a device backend's memory (CUDA: the activation dtype, the step's
//          k and v as they are), grown by Backend::reserve_exact_slots before a step needs them
//   R      ring_blocks: 1, or more where speculative tokens may be rolled back across a block
//          boundary (the rows of the block a rollback returns to must survive the rejected ones)
// Slots belong to sequences (KvCacheManager assigns them); a forked child's slot starts as a copy of
// its parent's (BatchPlan::exact_copies). Within a step the attention reads a sequence's rows of
// positions before the step from here and those of the step from its qkv, then stores the step's
// rows of its last R blocks.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/tensor.h"

namespace llmctl {

struct KvExactStore {
  int ring_blocks = 1, block_size = 16;
  int64_t kv_heads = 0, head_dim = 0;
  std::vector<float> k, v;
  Tensor k_dev, v_dev;

  int64_t device_slots() const { return k_dev.rank() == 4 ? k_dev.dim(0) : 0; }

  int64_t row_floats() const { return kv_heads * head_dim; }
  int64_t slot_floats() const { return int64_t(ring_blocks) * block_size * row_floats(); }
  int64_t num_slots() const { return slot_floats() ? int64_t(k.size()) / slot_floats() : 0; }
  void ensure_slot(int slot) {
    LLM_CHECK(slot >= 0 && slot < (1 << 20)) << "exact KV slot " << slot << " out of range";
    if (slot < num_slots()) return;
    k.resize(size_t((slot + 1) * slot_floats()));
    v.resize(k.size());
  }
  int64_t row_offset(int slot, int32_t position) const {
    const int64_t r = int64_t(position / block_size % ring_blocks) * block_size + position % block_size;
    return int64_t(slot) * slot_floats() + r * row_floats();
  }
};

}  // namespace llmctl
