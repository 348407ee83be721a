// Latency of fixed-size batches through the Engine, like llama-bench's pp/tg matrix: for each
// (batch, input length, output length) case, a warm-up run then N timed repetitions, each with
// fresh random prompts (prefix caching off, so nothing is reused between runs). The batch is
// admitted whole (max-num-seqs = batch; the token budget fits every prompt unless given).
//
// Per repetition (t = 0 when the batch is submitted):
//   prefill_ms   when the last request of the batch got its first token
//   tpot_ms      mean over requests of (finish - first token) / (output tokens - 1)
//   e2e_ms       when the last request finished
//   pp_tok_s     batch * input_len / prefill;  tg_tok_s  batch * (output_len - 1) / (e2e - prefill)
// Each is reported as mean, std (sample), min, median, p90, p99 and max over the repetitions.
// With a modelled pool (--simulate-threads; bench/thread_model_clock.h) every time is the modelled
// threads', and each case also reports, over its timed runs: serial_share, the share of the
// modelled time spent outside the pool's loops, and loop_efficiency, the loops' work over threads x
// their modelled time (1 when every loop splits evenly and no thread repeats another's work).
#pragma once
#include <atomic>
#include <vector>

#include "bench/report.h"
#include "engine/engine.h"
#include "engine/runtime.h"

namespace llmctl::bench {

struct LatencyOptions {
  std::vector<int> batches{1}, input_lens{128}, output_lens{128};
  int repetitions = 3;
  int warmup = 1;
  uint64_t seed = 0;
  EngineConfig engine;       // max_num_seqs is set per case; max_num_batched_tokens 0 = fit the batch
  bool progress = true;
  const std::atomic<bool>* stop = nullptr;
};

Report run_latency(Runtime& rt, const LatencyOptions& opts);

// "1,8,32" -> {1, 8, 32}; positive integers. Throws InputError naming `flag`.
std::vector<int> parse_int_list(const std::string& list, const std::string& flag);

}  // namespace llmctl::bench
