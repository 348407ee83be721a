// One request through the batching engine, for single-prompt `generate`: an Engine sized for just
// this request (KV blocks for prompt + max_tokens), text streamed as it becomes safe to emit.
#pragma once
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "engine/engine.h"

namespace llmctl {

struct GenerateOneResult {
  SequenceOutput output;      // the first (n = 1) sequence
  std::vector<int> prompt_ids;
  double prefill_seconds = 0;  // submit -> first token
  double decode_seconds = 0;   // first token -> finish
  EngineStats stats;           // the engine's at the end (speculative drafts and acceptance among them)
};

// Throws InputError for a request the engine refuses (empty prompt, over the context, ...).
// From `base`: max_context, speculative decoding (proposer, num_speculative_tokens) and
// jump_forward_tokens; the KV cache and step sizes are this request's own.
GenerateOneResult generate_one(Executor& executor, const Tokenizer& tokenizer, std::vector<int> prompt,
                               const SamplingParams& params, const std::function<void(std::string_view)>& on_text = {},
                               const EngineConfig& base = {});

}  // namespace llmctl
