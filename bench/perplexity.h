// Perplexity with a sliding window (the strided recipe of HF transformers' perplexity guide):
// windows of `ctx` tokens start every `stride` tokens; each window scores only the tokens past the
// previous window's end, each predicted from the window's own context. With stride < ctx every
// token but the first is scored exactly once; with stride == ctx the windows do not overlap and
// each window's first token goes unscored (no context), as in HF's loop. stride <= ctx.
// ppl = exp(sum of negative log-likelihoods / scored tokens).
#pragma once
#include <atomic>
#include <string>
#include <vector>

#include "bench/report.h"
#include "engine/runtime.h"

namespace llmctl::bench {

struct PerplexityOptions {
  std::string text_path;
  int ctx = 512, stride = 256;
  int max_tokens = 0;  // score only the first N tokens of the text (0 = all)
  bool progress = true;
  const std::atomic<bool>* stop = nullptr;
};

struct Window {
  int begin = 0, end = 0;    // tokens [begin, end) are the context
  int first_scored = 0;      // tokens [first_scored, end) are scored
};

// The windows for n tokens (pure; the order HF's loop visits them).
std::vector<Window> perplexity_windows(int n, int ctx, int stride);

Report run_perplexity(Runtime& rt, const PerplexityOptions& opts);

}  // namespace llmctl::bench
