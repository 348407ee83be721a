// Offline throughput through the Engine: every request submitted at once, the engine stepped until
// all have finished, once per sweep point (a fresh Engine each, e.g. max-num-seqs = 1, 8, 32).
// Greedy; EOS ignored, so each request generates exactly its output length.
//
// Row figures (one row per sweep point):
//   requests_per_s       completed requests / elapsed
//   output_tokens_per_s  generated tokens / elapsed (tokens of requests cut short by Ctrl-C count)
//   total_tokens_per_s   (prompt tokens of started requests + generated tokens) / elapsed
//   peak_kv_usage_pct    highest fraction of KV blocks in use after a step
//   ttft/tpot            per request from the engine's timestamps (everything queued at t = 0)
#pragma once
#include <atomic>
#include <string>
#include <vector>

#include "bench/dataset.h"
#include "bench/report.h"
#include "engine/engine.h"
#include "engine/runtime.h"

namespace llmctl::bench {

struct ThroughputOptions {
  std::vector<BenchRequest> requests;  // with prompt_ids
  EngineConfig engine;                  // the base configuration
  std::string sweep_key;                // "" (one run) | max-num-seqs | max-num-batched-tokens
  std::vector<int> sweep_values;
  bool progress = true;
  const std::atomic<bool>* stop = nullptr;  // set (Ctrl-C): stop, report what was measured
};

// "max-num-seqs=1,8,32" -> key and values. Throws InputError.
void parse_sweep(const std::string& spec, std::string& key, std::vector<int>& values);

Report run_throughput(Runtime& rt, const ThroughputOptions& opts);

}  // namespace llmctl::bench
