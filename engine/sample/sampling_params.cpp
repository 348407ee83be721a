#include "engine/sample/sampling_params.h"

#include <cmath>

#include "engine/core/error.h"

namespace llmctl {

void SamplingParams::validate() const {
  LLM_REQUIRE(std::isfinite(temperature) && temperature >= 0) << "temperature must be >= 0, got " << temperature;
  LLM_REQUIRE(top_k >= 0) << "top_k must be >= 0 (0 disables it), got " << top_k;
  LLM_REQUIRE(std::isfinite(top_p) && top_p > 0 && top_p <= 1) << "top_p must be in (0, 1], got " << top_p;
  LLM_REQUIRE(std::isfinite(min_p) && min_p >= 0 && min_p <= 1) << "min_p must be in [0, 1], got " << min_p;
  LLM_REQUIRE(std::isfinite(repetition_penalty) && repetition_penalty > 0)
      << "repetition_penalty must be > 0, got " << repetition_penalty;
  LLM_REQUIRE(max_tokens >= 1) << "max_tokens must be >= 1, got " << max_tokens;
  for (const auto& s : stop) LLM_REQUIRE(!s.empty()) << "stop strings must not be empty";
}

}  // namespace llmctl
