// Logprobs, as vLLM's default "raw" logprobs: the log-softmax of the model's logits BEFORE any
// processing (no logit bias, penalties, temperature or truncation). Computed in double.
// Ranks are 1-based; ties in logit are broken by the lower token id (for ranks and top-N alike).
#pragma once
#include <span>
#include <vector>

namespace llmctl {

struct TopLogprob {
  int id;
  float logprob;
};

// One position: the token that was chosen (or, for a prompt, the token that came next).
struct TokenLogprobs {
  int token = -1;
  float logprob = 0;             // raw logprob of token
  int rank = 0;                  // 1 + number of tokens ahead of it (higher logit, or equal and lower id)
  std::vector<TopLogprob> top;   // the top_n most probable, best first (empty when top_n = 0)
};

// log-softmax of a logits row (for logprobs and the golden tests), in double for accuracy.
std::vector<float> log_softmax(const float* logits, int vocab);
// log(sum(exp(logits))), in double.
double log_sum_exp(const float* logits, int vocab);

// The top_n (id, logprob) of a row given its log-sum-exp; no full sort (a bounded heap).
std::vector<TopLogprob> top_logprobs(const float* logits, int vocab, double lse, int top_n);

// token's logprob and rank, and the top_n of the row (top_n 0: none).
TokenLogprobs token_logprobs(const float* logits, int vocab, int token, int top_n);

// Prompt logprobs over a block of rows: logits is [rows, vocab], row t being the model's output at
// prompt position t, scored against targets[t] = prompt[t + 1]. The first prompt token has no
// logprob (nothing predicts it), so a prompt of length L gives L - 1 entries from its L - 1 rows.
std::vector<TokenLogprobs> prompt_logprobs(const float* logits, int rows, int vocab, std::span<const int> targets,
                                           int top_n);

}  // namespace llmctl
