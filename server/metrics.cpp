#include "server/metrics.h"

#include <cstdio>

namespace llmctl::server {

namespace {
std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}
}  // namespace

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(const std::string& name, std::string& out) const {
  int64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += name + "_bucket{le=\"" + num(bounds_[i]) + "\"} " + std::to_string(cum) + "\n";
  }
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += name + "_sum " + num(sum_) + "\n";
  out += name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}),
      tpot_({0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5}),
      e2e_({0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 600}) {}

void Metrics::set_gauges(int running, int waiting, double kv_usage, double prefix_hit_ratio) {
  std::lock_guard<std::mutex> l(mu_);
  running_ = running;
  waiting_ = waiting;
  kv_usage_ = kv_usage;
  prefix_hit_ = prefix_hit_ratio;
}

void Metrics::request_done(const std::string& finish_reason, double ttft, double tpot, double e2e,
                           int64_t prompt_tokens, int64_t generation_tokens) {
  std::lock_guard<std::mutex> l(mu_);
  if (ttft >= 0) ttft_.observe(ttft);
  if (tpot >= 0) tpot_.observe(tpot);
  e2e_.observe(e2e);
  prompt_tokens_ += prompt_tokens;
  generation_tokens_ += generation_tokens;
  ++success_[finish_reason];
}

void Metrics::add_step_counts(int64_t preemptions, int64_t draft_tokens, int64_t accepted_draft_tokens,
                              int64_t jump_forward_tokens) {
  std::lock_guard<std::mutex> l(mu_);
  preemptions_ += preemptions;
  jump_forward_tokens_ += jump_forward_tokens;
  draft_tokens_ += draft_tokens;
  accepted_draft_tokens_ += accepted_draft_tokens;
}

void Metrics::request_error(int status) {
  std::lock_guard<std::mutex> l(mu_);
  ++errors_[status];
}

std::string Metrics::render(const GrammarCompilerStats& g) const {
  std::lock_guard<std::mutex> l(mu_);
  std::string out;
  header(out, "llmctl_requests_running", "gauge", "Requests whose sequences are running in the engine.");
  out += "llmctl_requests_running " + std::to_string(running_) + "\n";
  header(out, "llmctl_requests_waiting", "gauge", "Requests waiting to be scheduled.");
  out += "llmctl_requests_waiting " + std::to_string(waiting_) + "\n";
  header(out, "llmctl_kv_cache_usage_ratio", "gauge", "Fraction of KV cache blocks in use (0 to 1).");
  out += "llmctl_kv_cache_usage_ratio " + num(kv_usage_) + "\n";
  header(out, "llmctl_prefix_cache_hit_ratio", "gauge", "Prompt tokens served from the prefix cache, over all prompt tokens.");
  out += "llmctl_prefix_cache_hit_ratio " + num(prefix_hit_) + "\n";
  header(out, "llmctl_time_to_first_token_seconds", "histogram", "Time from arrival to the first generated token.");
  ttft_.render("llmctl_time_to_first_token_seconds", out);
  header(out, "llmctl_time_per_output_token_seconds", "histogram", "Mean time per output token after the first, per request.");
  tpot_.render("llmctl_time_per_output_token_seconds", out);
  header(out, "llmctl_e2e_request_latency_seconds", "histogram", "Time from arrival to the end of the request.");
  e2e_.render("llmctl_e2e_request_latency_seconds", out);
  header(out, "llmctl_prompt_tokens_total", "counter", "Prompt tokens of finished requests.");
  out += "llmctl_prompt_tokens_total " + std::to_string(prompt_tokens_) + "\n";
  header(out, "llmctl_generation_tokens_total", "counter", "Generated tokens of finished requests.");
  out += "llmctl_generation_tokens_total " + std::to_string(generation_tokens_) + "\n";
  header(out, "llmctl_preemptions_total", "counter", "Sequences preempted (recomputed) for lack of KV blocks.");
  out += "llmctl_preemptions_total " + std::to_string(preemptions_) + "\n";
  header(out, "llmctl_spec_decode_draft_tokens_total", "counter", "Speculative draft tokens verified.");
  out += "llmctl_spec_decode_draft_tokens_total " + std::to_string(draft_tokens_) + "\n";
  header(out, "llmctl_spec_decode_accepted_tokens_total", "counter", "Speculative draft tokens accepted (kept).");
  out += "llmctl_spec_decode_accepted_tokens_total " + std::to_string(accepted_draft_tokens_) + "\n";
  header(out, "llmctl_jump_forward_tokens_total", "counter", "Tokens a grammar forced, taken without a draw.");
  out += "llmctl_jump_forward_tokens_total " + std::to_string(jump_forward_tokens_) + "\n";
  header(out, "llmctl_grammar_compiles_total", "counter", "Structured-output grammars compiled (cache misses).");
  out += "llmctl_grammar_compiles_total " + std::to_string(g.compiles) + "\n";
  header(out, "llmctl_grammar_cache_hits_total", "counter", "Structured-output grammars found compiled in the cache.");
  out += "llmctl_grammar_cache_hits_total " + std::to_string(g.cache_hits) + "\n";
  header(out, "llmctl_grammar_failures_total", "counter", "Grammars refused (bad, unsupported, or past their time limit).");
  out += "llmctl_grammar_failures_total " + std::to_string(g.failures + g.timeouts) + "\n";
  header(out, "llmctl_request_success_total", "counter", "Requests finished, by finish reason.");
  for (const char* r : {"stop", "length"})
    out += std::string("llmctl_request_success_total{finish_reason=\"") + r + "\"} " +
           std::to_string(success_.count(r) ? success_.at(r) : 0) + "\n";
  for (const auto& [r, n] : success_)
    if (r != "stop" && r != "length")
      out += "llmctl_request_success_total{finish_reason=\"" + r + "\"} " + std::to_string(n) + "\n";
  header(out, "llmctl_request_errors_total", "counter", "Requests answered with an error, by HTTP status code.");
  for (const auto& [code, n] : errors_)
    out += "llmctl_request_errors_total{code=\"" + std::to_string(code) + "\"} " + std::to_string(n) + "\n";
  return out;
}

}  // namespace llmctl::server
