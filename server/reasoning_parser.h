// Reasoning models' `<think> ... </think>` blocks as OpenAI-style `reasoning_content` (vLLM's
// reasoning parsers for DeepSeek-R1 and Qwen3 do the same). The output is reasoning from its start
// until `</think>` when it starts with `<think>` or when the prompt already opened the block (the
// template ended with `<think>`); everything else, and all that follows `</think>`, is content.
// Streaming: a tag split over deltas is held back until it can be told from text.
//
// States: start (has the output opened a block?) -> reasoning -> content; start -> content.
#pragma once
#include <string>
#include <string_view>

namespace llmctl::server {

struct ReasoningPiece {
  std::string reasoning, content;
};

class ReasoningParser {
 public:
  // opened: the prompt ends inside a block (its last non-blank text is `<think>`).
  explicit ReasoningParser(bool opened = false);
  // The reasoning and content a delta adds (text that may still be part of a tag is held back).
  ReasoningPiece push(std::string_view delta);
  // What is held back, at the end of the output.
  ReasoningPiece finish();
  bool saw_reasoning() const { return saw_reasoning_; }

 private:
  enum class State { start, reasoning, content };
  State state_;
  std::string held_;
  bool saw_reasoning_ = false;
};

// The whole output at once.
ReasoningPiece split_reasoning(std::string_view text, bool opened = false);

// Whether a rendered prompt leaves the model inside a `<think>` block.
bool prompt_opens_reasoning(std::string_view prompt);

}  // namespace llmctl::server
