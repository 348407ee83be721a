#include "engine/sample/sampling_params.h"

#include <cmath>

#include "engine/core/error.h"

namespace llmctl {

namespace {
void require_logprobs(const std::optional<int>& v, const char* field) {
  if (v) {
    LLM_REQUIRE(*v >= 0 && *v <= 20) << field << " must be in [0, 20], got " << *v;
  }
}
void require_token(int id, int vocab_size, const char* field) {
  if (vocab_size > 0) {
    LLM_REQUIRE(id >= 0 && id < vocab_size)
        << field << ": token id " << id << " is outside the vocabulary [0, " << vocab_size << ")";
  } else {
    LLM_REQUIRE(id >= 0) << field << ": token id " << id << " is negative";
  }
}
void require_penalty(float v, const char* field) {
  LLM_REQUIRE(std::isfinite(v) && v >= -2 && v <= 2) << field << " must be in [-2, 2], got " << v;
}
}  // namespace

void SamplingParams::validate(int vocab_size) const {
  LLM_REQUIRE(std::isfinite(temperature) && temperature >= 0) << "temperature must be >= 0, got " << temperature;
  LLM_REQUIRE(top_k >= -1) << "top_k must be >= 0 (0 or -1 disables it), got " << top_k;
  LLM_REQUIRE(std::isfinite(top_p) && top_p > 0 && top_p <= 1) << "top_p must be in (0, 1], got " << top_p;
  LLM_REQUIRE(std::isfinite(min_p) && min_p >= 0 && min_p <= 1) << "min_p must be in [0, 1], got " << min_p;
  require_penalty(presence_penalty, "presence_penalty");
  require_penalty(frequency_penalty, "frequency_penalty");
  LLM_REQUIRE(std::isfinite(repetition_penalty) && repetition_penalty > 0)
      << "repetition_penalty must be > 0, got " << repetition_penalty;
  for (const auto& [id, bias] : logit_bias) {
    require_token(id, vocab_size, "logit_bias");
    LLM_REQUIRE(std::isfinite(bias) && bias >= -100 && bias <= 100)
        << "logit_bias: the bias of token " << id << " must be in [-100, 100], got " << bias;
  }
  LLM_REQUIRE(max_tokens >= 1) << "max_tokens must be >= 1, got " << max_tokens;
  LLM_REQUIRE(min_tokens >= 0 && min_tokens <= max_tokens)
      << "min_tokens must be in [0, max_tokens = " << max_tokens << "], got " << min_tokens;
  LLM_REQUIRE(n >= 1) << "n must be >= 1, got " << n;
  if (best_of) {
    LLM_REQUIRE(*best_of >= n) << "best_of must be >= n = " << n << ", got " << *best_of;
  }
  require_logprobs(logprobs, "logprobs");
  require_logprobs(prompt_logprobs, "prompt_logprobs");
  for (const auto& s : stop) LLM_REQUIRE(!s.empty()) << "stop strings must not be empty";
  for (int id : stop_token_ids) require_token(id, vocab_size, "stop_token_ids");
}

}  // namespace llmctl
