// What the Engine gives back for a request: its outputs (one per returned sequence), its result
// once finished, and the stream events of its text as it becomes safe to emit.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sample/logprobs.h"

namespace llmctl {

struct SequenceOutput {
  int index = 0;
  std::vector<int> token_ids;          // generated tokens (a final EOS / stop token is not included)
  std::string text;
  std::string finish_reason;           // "stop" | "length" | "abort" | "error" (see RequestResult::error)
  std::vector<TokenLogprobs> logprobs;  // per generated token, when params.logprobs is set
  double cumulative_logprob = 0;       // sum of the chosen tokens' logprobs, when `scored`
  bool scored = false;                 // logprobs were computed (params.logprobs set, or best_of > n)
};

struct RequestResult {
  int64_t id = 0;
  std::vector<int> prompt_ids;
  std::vector<SequenceOutput> outputs;  // n of them (the n best of best_of), by index
  // With params.prompt_logprobs: one entry per prompt token, the first empty (nothing predicts it).
  std::vector<std::optional<TokenLogprobs>> prompt_logprobs;
  bool finished = false;
  // Non-empty when the request failed: drawing, decoding or stop-checking one of its sequences
  // threw. The request ends at once (outputs partial, finish_reason "error"); the other requests of
  // the step go on.
  std::string error;
  double submit_seconds = 0, first_token_seconds = 0, finish_seconds = 0;  // steady clock
};

// What a stream callback receives: the text of sequence `index` that became safe to emit, and the
// tokens accepted since the previous event (their text is in this piece or held back for a stop
// string). `done` marks the sequence's last event, with its finish_reason.
struct StreamEvent {
  int64_t request_id = 0;
  int index = 0;
  std::string_view text;
  std::span<const int> token_ids;
  std::span<const TokenLogprobs> logprobs;  // per token in token_ids, when params.logprobs is set
  bool done = false;
  std::string_view finish_reason;           // when done: "stop" | "length" | "abort"
};

// Called on the engine's thread (from step() / abort()).
using StreamFn = std::function<void(const StreamEvent&)>;

}  // namespace llmctl
