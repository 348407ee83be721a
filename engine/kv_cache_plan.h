// plan_kv_cache: what the engine's paged KV cache is before it is allocated: the layout of a block
// (dtype, scales, exact open-block rows), the pools (one per kind of layer, engine/kv/kv_cache_groups.h)
// and their blocks, from the device's free memory, a configured size in bytes, or a block count.
#pragma once
#include <vector>

#include "engine/executor/executor.h"
#include "engine/kv/kv_cache_spec.h"

namespace llmctl {

// What the sizing reads of the engine's configuration.
struct KvCacheRequest {
  double bytes = 0;                    // the cache's size without a device budget (--kv-cache-gb)
  int num_blocks = 0;                  // > 0: the full-attention pool's blocks, whatever the memory
  double gpu_memory_utilization = 0;   // > 0: size from the device's memory (where it has a budget)
  int block_size = 16, max_seqs = 1, max_batched_tokens = 1;
  int draft_tokens = 0;                // speculative tokens a sequence may verify in one step (0: none)
};

struct KvCachePlan {
  KvCacheSpec spec;
  KvCacheLayout layout;
  std::vector<int> group_layers;  // the model's layers in each pool
};

// Throws InputError when the cache would hold fewer than 2 blocks in a pool.
KvCachePlan plan_kv_cache(Executor& exec, const KvCacheRequest& r);

}  // namespace llmctl
