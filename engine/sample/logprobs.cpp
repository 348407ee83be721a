#include "engine/sample/logprobs.h"

#include <algorithm>
#include <cmath>
#include <queue>

#include "engine/core/error.h"
#include "engine/backend/cpu/vec_math.h"

namespace llmctl {

double log_sum_exp(const float* logits, int vocab) {
  LLM_CHECK(vocab > 0) << "empty logits row";
  const float m = max_value(logits, vocab);
  if (!std::isfinite(m)) return m;
  return double(m) + std::log(exp_shifted(logits, vocab, m, 1.0f, nullptr));
}

std::vector<float> log_softmax(const float* logits, int vocab) {
  const double lse = log_sum_exp(logits, vocab);
  std::vector<float> out(vocab);
  for (int i = 0; i < vocab; ++i) out[i] = float(double(logits[i]) - lse);
  return out;
}

std::vector<TopLogprob> top_logprobs(const float* logits, int vocab, double lse, int top_n) {
  top_n = std::min(top_n, vocab);
  if (top_n <= 0) return {};
  // ahead(a, b): a ranks before b.
  auto ahead = [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  // A heap whose top is the weakest of the best top_n seen so far.
  std::priority_queue<int, std::vector<int>, decltype(ahead)> heap(ahead);
  for (int i = 0; i < vocab; ++i) {
    if (int(heap.size()) < top_n) {
      heap.push(i);
    } else if (ahead(i, heap.top())) {
      heap.pop();
      heap.push(i);
    }
  }
  std::vector<TopLogprob> out(heap.size());
  for (int k = int(out.size()) - 1; k >= 0; --k) {
    const int id = heap.top();
    heap.pop();
    out[k] = {id, float(double(logits[id]) - lse)};
  }
  return out;
}

TokenLogprobs token_logprobs(const float* logits, int vocab, int token, int top_n) {
  LLM_CHECK(token >= 0 && token < vocab) << "token " << token << " vocab " << vocab;
  const double lse = log_sum_exp(logits, vocab);
  TokenLogprobs r;
  r.token = token;
  r.logprob = float(double(logits[token]) - lse);
  const float l = logits[token];
  int ahead = 0;  // branch-free so that it vectorizes
  for (int i = 0; i < vocab; ++i) ahead += int(logits[i] > l) | (int(logits[i] == l) & int(i < token));
  r.rank = ahead + 1;
  r.top = top_logprobs(logits, vocab, lse, top_n);
  return r;
}

std::vector<TokenLogprobs> prompt_logprobs(const float* logits, int rows, int vocab, std::span<const int> targets,
                                           int top_n) {
  LLM_CHECK(int(targets.size()) == rows) << "prompt_logprobs: " << rows << " rows, " << targets.size() << " targets";
  std::vector<TokenLogprobs> out;
  out.reserve(rows);
  for (int t = 0; t < rows; ++t) out.push_back(token_logprobs(logits + size_t(t) * vocab, vocab, targets[t], top_n));
  return out;
}

}  // namespace llmctl
