// `bench serve`: an OpenAI-compatible streaming client against any server (llmctl, vLLM, TGI,
// llama-server). For each request rate: requests are sent on a Poisson schedule (inf = all at
// once), at most max_concurrency in flight, one thread per in-flight request, each a POST to
// /v1/completions with "stream": true and "stream_options": {"include_usage": true}.
//
// Row figures per rate (times in ms): TTFT, TPOT, ITL, E2E as mean/std/min/median/p90/p99/max;
// completed, failed; duration (first send -> last response); request_throughput (completed /
// duration), output_throughput (output tokens / duration), total_token_throughput; goodput
// (completed requests meeting every --goodput SLO, per second). Token counts come from the
// server's usage when it sends usage, else from the number of text chunks (prompt: the dataset's).
#pragma once
#include <atomic>
#include <string>
#include <vector>

#include "bench/dataset.h"
#include "bench/report.h"

namespace llmctl::bench {

struct Slo {  // 0 = no bound
  double ttft_ms = 0, tpot_ms = 0, e2el_ms = 0;
};

struct ServeOptions {
  std::string url;                    // http://HOST:PORT
  std::string endpoint = "/v1/completions";
  std::string model;                  // "model" field; empty: the first of GET /v1/models, else omitted
  std::string api_key;                // Authorization: Bearer ..., when set
  std::vector<double> rates;          // requests per second; inf = all at once
  int max_concurrency = 0;            // 0 = unbounded
  bool ignore_eos = false;            // sends "ignore_eos": true (vLLM, llmctl)
  Slo goodput;
  uint64_t seed = 0;
  double timeout_s = 600;             // per request (read timeout)
  std::vector<BenchRequest> requests;
  bool progress = true;
  const std::atomic<bool>* stop = nullptr;
};

// "ttft:500,tpot:50,e2el:2000" -> Slo (ms). Throws InputError.
Slo parse_goodput(const std::string& spec);

Report run_serve_bench(const ServeOptions& opts);

}  // namespace llmctl::bench
