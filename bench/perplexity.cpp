#include "bench/perplexity.h"

#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>

#include "bench/progress.h"
#include "bench/run_meta.h"
#include "engine/core/error.h"
#include "engine/scorer.h"
#include "engine/tokenizer/prompt.h"

namespace llmctl::bench {

std::vector<Window> perplexity_windows(int n, int ctx, int stride) {
  LLM_REQUIRE(ctx >= 2) << "--ctx must be >= 2";
  LLM_REQUIRE(stride >= 1 && stride <= ctx) << "--stride must be in [1, ctx]";
  std::vector<Window> w;
  int prev_end = 0;
  for (int begin = 0; begin < n; begin += stride) {
    const int end = std::min(begin + ctx, n);
    const int first = std::max(prev_end, begin + 1);
    if (first < end) w.push_back({begin, end, first});
    prev_end = end;
    if (end == n) break;
  }
  return w;
}

Report run_perplexity(Runtime& rt, const PerplexityOptions& o) {
  std::ifstream f(o.text_path, std::ios::binary);
  LLM_REQUIRE(f) << "cannot read " << o.text_path;
  std::stringstream ss;
  ss << f.rdbuf();
  std::vector<int> ids = encode_prompt(*rt.tokenizer, ss.str());
  if (o.max_tokens > 0 && int(ids.size()) > o.max_tokens) ids.resize(size_t(o.max_tokens));
  LLM_REQUIRE(ids.size() >= 2) << o.text_path << " has fewer than 2 tokens";
  const std::vector<Window> windows = perplexity_windows(int(ids.size()), o.ctx, o.stride);

  ScorerOptions so;
  so.max_context = o.ctx;
  so.prefill_chunk = o.ctx;
  Scorer scorer(*rt.executor, *rt.tokenizer, so);
  Report rep;
  rep.mode = "ppl";
  rep.meta = run_meta(&rt);
  rep.meta["config"] = {{"text", o.text_path}, {"ctx", o.ctx}, {"stride", o.stride}, {"max_tokens", o.max_tokens}};
  Progress bar("bench ppl", int64_t(windows.size()), o.progress);
  const auto t0 = std::chrono::steady_clock::now();
  double nll_sum = 0;
  int64_t scored = 0, computed = 0;
  nlohmann::ordered_json per_window = nlohmann::ordered_json::array();
  size_t done = 0;
  for (const Window& w : windows) {
    if (o.stop && o.stop->load()) {
      rep.interrupted = true;
      break;
    }
    std::vector<int> ctx(ids.begin() + w.begin, ids.begin() + w.end);
    std::vector<double> lp = scorer.target_logprobs(ctx, w.first_scored - w.begin);
    double wsum = 0;
    for (double x : lp) wsum -= x;
    nll_sum += wsum;
    scored += int64_t(lp.size());
    computed += w.end - w.begin;
    per_window.push_back({{"begin", w.begin}, {"end", w.end}, {"scored", lp.size()}, {"nll", wsum / double(lp.size())}});
    bar.update(int64_t(++done));
  }
  bar.finish();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::ordered_json row;
  row["tokens"] = ids.size();
  row["ctx"] = o.ctx;
  row["stride"] = o.stride;
  row["windows"] = done;
  row["scored_tokens"] = scored;
  row["nll_sum"] = nll_sum;
  row["nll_mean"] = scored ? nll_sum / double(scored) : 0.0;
  row["ppl"] = scored ? std::exp(nll_sum / double(scored)) : 0.0;
  row["seconds"] = secs;
  row["tokens_per_s"] = secs > 0 ? double(computed) / secs : 0.0;
  rep.rows.push_back(row);
  rep.extra["windows"] = per_window;
  rep.table = {{"tokens", "tokens", 0},        {"ctx", "ctx", 0},     {"stride", "stride", 0},
               {"windows", "windows", 0},      {"scored_tokens", "scored", 0}, {"nll_mean", "mean NLL", 5},
               {"ppl", "perplexity", 4},       {"seconds", "seconds", 2}, {"tokens_per_s", "tok/s", 1}};
  return rep;
}

}  // namespace llmctl::bench
