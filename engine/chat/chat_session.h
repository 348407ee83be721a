// ChatSession: a multi-turn conversation over one long-lived Engine, for `llmctl chat`.
//
// Each turn renders the whole conversation with the model's chat template and submits it as a
// fresh request. Nothing is carried between turns but the messages: the KV blocks of earlier turns
// are found again by the engine's prefix cache (the rendered prompt of turn k+1 starts with the
// prompt and reply of turn k), so only the new tokens are computed.
//
// Decisions:
// - An interrupted reply (stop flag set) is kept in the history as far as it got, as llama.cpp
//   does: the user saw it, and its KV blocks are cached for the next turn. A reply interrupted
//   before any text is dropped together with its user message (the turn is undone).
// - When prompt + max_tokens no longer fit the context (or the KV cache), the oldest turns
//   (user message + reply) are dropped from the history, one at a time, until they do; the system
//   message is always kept. A message that does not fit even alone refuses the turn (InputError)
//   and leaves the history as it was.
// - clear() empties the history and keeps the system message (a setting, like --system).
//
// Not thread-safe: turn() runs the engine on the caller's thread. The stop flag may be set from
// anywhere (a signal handler included); it is read between engine steps.
#pragma once
#include <atomic>
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/engine.h"

namespace llmctl {

struct ChatTurnStats {
  int prompt_tokens = 0;         // the rendered conversation, this turn's message included
  int cached_prompt_tokens = 0;  // of them, served from the prefix cache (KV of earlier turns)
  int generated_tokens = 0;
  double prefill_seconds = 0;    // submit -> first token
  double decode_seconds = 0;     // first token -> finish
  std::string finish_reason;     // "stop" | "length" | "abort"
  int dropped_turns = 0;         // oldest turns dropped from the history to fit the context
  // Decode speed: the first token comes with the prefill, so it counts the ones after it.
  double decode_tokens_per_second() const {
    return decode_seconds > 0 && generated_tokens > 1 ? (generated_tokens - 1) / decode_seconds : 0;
  }
  // Prompt tokens computed (not found in the cache) per second of prefill.
  double prefill_tokens_per_second() const {
    return prefill_seconds > 0 ? (prompt_tokens - cached_prompt_tokens) / prefill_seconds : 0;
  }
};

class ChatSession {
 public:
  using TextFn = std::function<void(std::string_view)>;

  // The engine (and its KV cache) lives as long as the session; one Engine per executor at a time.
  // params: the sampling of every reply (max_tokens = per reply); validated here.
  ChatSession(Executor& executor, const Tokenizer& tokenizer, const EngineConfig& config, SamplingParams params);

  // One turn: appends `user`, generates the reply (streamed through on_text), appends it (see the
  // decisions above). Throws InputError for a message that is empty, not UTF-8 or too long, or that
  // the template rejects; the history is unchanged then.
  ChatTurnStats turn(const std::string& user, const TextFn& on_text, const std::atomic<bool>& stop);

  void clear();                             // history gone, system message kept
  void set_system(const std::string& text);  // "" removes it (the template's default applies)
  const std::string& system() const { return system_; }
  int num_turns() const { return int(history_.size() / 2); }
  // Tokens a prompt plus its reply may take: the context, or the KV cache when smaller.
  int token_limit() const;
  const Engine& engine() const { return engine_; }

 private:
  nlohmann::json messages(size_t first) const;  // system (when set) + history from history_[first]
  std::vector<int> render_fitting(size_t& first) const;

  const Tokenizer& tok_;
  Engine engine_;
  SamplingParams params_;
  int block_size_;
  std::string system_;
  nlohmann::json history_ = nlohmann::json::array();  // user, assistant, user, assistant, ...
};

}  // namespace llmctl
