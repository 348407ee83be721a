// What the Engine counts over its steps (Engine::stats()).
#pragma once
#include <cstdint>
#include <vector>

#include "engine/kv/kv_cache_groups.h"

namespace llmctl {

struct EngineStats {
  int64_t steps = 0, prompt_tokens = 0, generated_tokens = 0, preemptions = 0;
  double forward_seconds = 0;   // host wall time of forward + sampling (overlapping steps counted once)
  double device_seconds = 0;    // device time inside steps (CUDA events; 0 on the CPU)
  double waste_sum = 0;   // sum over steps of the KV waste after the step (allocated slots not holding a token)
  double usage_peak = 0;  // highest fraction of blocks in use after a step
  std::vector<int> peak_blocks;  // per KV pool (kv_cache_groups.h): the most blocks in use after a step
  int64_t draft_tokens = 0;           // speculative drafts verified (EngineConfig::proposer)
  int64_t accepted_draft_tokens = 0;  // of them, kept (each one a token without a step of its own)
  int64_t jump_forward_tokens = 0;    // tokens a grammar forced, taken without a draw (EngineConfig)
  int64_t grammar_unmasked_draws = 0; // draws under a grammar that filled no mask (unmasked_draw.h)
  // The linears' weight bytes read (Backend::take_weight_bytes; rank 0's share under tensor
  // parallelism), and of them the decode steps' (one new token per sequence) and their count.
  uint64_t weight_bytes = 0, decode_weight_bytes = 0;
  int64_t decode_steps = 0;
  KvCacheStats kv;        // now
  // After a step: its preemptions, the cache's waste, usage and each pool's blocks in use.
  void record_step(const KvCacheGroups& kv, int64_t preempted);
  double mean_waste() const { return steps ? waste_sum / double(steps) : 0; }
  double acceptance_rate() const { return draft_tokens ? double(accepted_draft_tokens) / double(draft_tokens) : 0; }
};

}  // namespace llmctl
