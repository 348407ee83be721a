// Paged batches for the KV rows of the parity table (backend_ops_kv*.cpp).
#pragma once
#include <random>
#include <string>
#include <vector>

#include "engine/core/batch_plan.h"

namespace llmctl::backend_ops {

struct Seq {
  int before;  // tokens already in the cache
  int fresh;   // new tokens this step
};

// A plan over a pool of shuffled blocks with spare ones between (block tables with holes: physical
// ids out of order, unused ids, a -1 padded column). *num_blocks: the pool size.
BatchPlan paged_plan(const std::vector<Seq>& seqs, int B, std::mt19937& rng, int* num_blocks);
std::string seqs_str(const std::vector<Seq>& seqs);  // "0+17,31+1"
// The plan with -1 for each sequence's blocks wholly before its first new token's sliding window, as
// a sliding layer's own pool has released them (engine/kv/kv_cache_manager.h); *released: how many.
BatchPlan release_before_window(const BatchPlan& plan, int window, int B, int* released);

}  // namespace llmctl::backend_ops
