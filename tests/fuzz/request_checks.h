// Shared by the OpenAI and TGI request harnesses: the limits of a tiny server, and what an
// accepted request must satisfy (in-range token ids, parameters that validate again).
#pragma once
#include <vector>

#include "engine/sample/sampling_params.h"
#include "server/openai_api.h"
#include "engine/tokenizer/tokenizer.h"

namespace llmctl::fuzz {

inline server::ModelLimits tiny_limits(const Tokenizer& tok) {
  server::ModelLimits limits;
  limits.served_name = "tiny";
  limits.vocab_size = tok.vocab_size();
  limits.max_context = 512;
  limits.max_n = 4;
  return limits;
}

inline void check_accepted(const std::vector<std::vector<int>>& prompts, const SamplingParams& params, int vocab) {
  if (prompts.empty()) __builtin_trap();
  for (const auto& p : prompts)
    for (int id : p)
      if (id < 0 || id >= vocab) __builtin_trap();
  try {
    params.validate(vocab);
  } catch (const InputError&) {
    __builtin_trap();  // accepted parameters are valid
  }
}

}  // namespace llmctl::fuzz
