// Server metrics in the Prometheus text format (version 0.0.4). Names are stable; times are in
// seconds. Thread-safe: HTTP threads count errors, the engine thread everything else.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/structured/grammar_compiler.h"

namespace llmctl::server {

// A cumulative histogram with fixed upper bounds (the +Inf bucket is implied).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double v);
  // Appends the _bucket, _sum and _count lines of `name`.
  void render(const std::string& name, std::string& out) const;
  int64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bucket, not cumulative
  double sum_ = 0;
  int64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  // Gauges, from the engine thread after each step.
  void set_gauges(int running, int waiting, double kv_usage, double prefix_hit_ratio);
  // A finished request: latencies (first token / per output token / end to end) and counts.
  void request_done(const std::string& finish_reason, double ttft, double tpot, double e2e, int64_t prompt_tokens,
                    int64_t generation_tokens);
  // Engine counters since the last call: preempted sequences, speculative drafts verified and kept,
  // tokens grammars forced (jump-forward).
  void add_step_counts(int64_t preemptions, int64_t draft_tokens, int64_t accepted_draft_tokens,
                       int64_t jump_forward_tokens = 0);
  void request_error(int status);
  // grammars: the structured-output compiler's counters.
  std::string render(const GrammarCompilerStats& grammars = {}) const;

 private:
  mutable std::mutex mu_;
  int running_ = 0, waiting_ = 0;
  double kv_usage_ = 0, prefix_hit_ = 0;
  Histogram ttft_, tpot_, e2e_;
  int64_t prompt_tokens_ = 0, generation_tokens_ = 0, preemptions_ = 0;
  int64_t draft_tokens_ = 0, accepted_draft_tokens_ = 0, jump_forward_tokens_ = 0;
  std::map<std::string, int64_t> success_;  // by finish_reason
  std::map<int, int64_t> errors_;           // by HTTP status
};

}  // namespace llmctl::server
