#include "engine/chat/chat_session.h"

#include <algorithm>

#include "engine/core/error.h"
#include "engine/core/utf8.h"
#include "engine/tokenizer/prompt.h"

namespace llmctl {

ChatSession::ChatSession(Executor& executor, const Tokenizer& tokenizer, const EngineConfig& config,
                         SamplingParams params)
    : tok_(tokenizer), engine_(executor, tokenizer, config), params_(std::move(params)),
      block_size_(config.sched.block_size) {
  params_.validate(executor.config().vocab_size);
  LLM_REQUIRE(params_.num_generated_sequences() == 1) << "a chat reply is one sequence (n = 1)";
  // Fail at start, not at the first message, for a model without a usable chat template.
  (void)tok_.compiled_chat_template();
}

int ChatSession::token_limit() const {
  return int(std::min<int64_t>(engine_.max_context(), int64_t(engine_.num_blocks()) * block_size_));
}

void ChatSession::clear() { history_ = nlohmann::json::array(); }

void ChatSession::set_system(const std::string& text) {
  LLM_REQUIRE(utf8_valid(text)) << "the system message is not valid UTF-8";
  system_ = text;
}

nlohmann::json ChatSession::messages(size_t first) const {
  nlohmann::json m = nlohmann::json::array();
  if (!system_.empty()) m.push_back({{"role", "system"}, {"content", system_}});
  for (size_t i = first; i < history_.size(); ++i) m.push_back(history_[i]);
  return m;
}

// Renders the conversation from history_[first] on, dropping the oldest turns (two messages each)
// while it does not fit; `first` returns where the kept history starts. Throws InputError when the
// last message alone does not fit.
std::vector<int> ChatSession::render_fitting(size_t& first) const {
  const int limit = token_limit();
  first = 0;
  for (;;) {
    std::vector<int> ids = encode_chat(tok_, messages(first));
    if (int64_t(ids.size()) + params_.max_tokens <= limit) return ids;
    if (history_.size() - first <= 1)
      LLM_THROW() << "the message does not fit: the prompt is " << ids.size() << " tokens"
                  << (first > 0 ? " with every earlier turn dropped" : "") << " and a reply may take "
                  << params_.max_tokens << " (-n), over the " << limit
                  << "-token limit (context or KV cache); shorten the message, lower -n"
                  << (system_.empty() ? "" : " or shorten the system message");
    first += 2;
  }
}

ChatTurnStats ChatSession::turn(const std::string& user, const TextFn& on_text, const std::atomic<bool>& stop) {
  LLM_REQUIRE(!user.empty()) << "the message is empty";
  LLM_REQUIRE(utf8_valid(user)) << "the message is not valid UTF-8";
  LLM_CHECK(history_.size() % 2 == 0) << "the history alternates user and assistant messages";
  ChatTurnStats st;
  history_.push_back({{"role", "user"}, {"content", user}});
  std::vector<int> prompt;
  int64_t id = 0;
  const KvCacheStats before = engine_.stats().kv;
  try {
    size_t first = 0;
    prompt = render_fitting(first);
    Engine::StreamFn stream;
    if (on_text)
      stream = [&](const StreamEvent& e) {
        if (e.index == 0 && !e.text.empty()) on_text(e.text);
      };
    id = engine_.submit(prompt, params_, stream);
    // The turn is accepted: the dropped turns go for good (later turns need not render them again).
    st.dropped_turns = int(first / 2);
    history_.erase(history_.begin(), history_.begin() + std::ptrdiff_t(first));
    while (engine_.has_unfinished()) {
      // Checked between steps: a step is one token (or one prefill chunk), so the abort is prompt.
      if (stop.load(std::memory_order_relaxed)) {
        engine_.abort(id);
        break;
      }
      if (!engine_.step()) {
        LLM_CHECK(!engine_.has_unfinished()) << "engine stalled with the reply unfinished";
      }
    }
  } catch (...) {
    if (id) {
      try {  // leave the engine empty for the next turn
        engine_.abort(id);
        (void)engine_.take_result(id);
      } catch (...) {
      }
    }
    history_.erase(history_.end() - 1);
    throw;
  }
  RequestResult r = *engine_.take_result(id);
  const KvCacheStats after = engine_.stats().kv;
  if (!r.error.empty()) {
    history_.erase(history_.end() - 1);
    throw Error("generating the reply failed: " + r.error);
  }
  const SequenceOutput& out = r.outputs.at(0);
  st.prompt_tokens = int(prompt.size());
  st.cached_prompt_tokens = int(after.prompt_tokens_cached - before.prompt_tokens_cached);
  st.generated_tokens = int(out.token_ids.size());
  st.finish_reason = out.finish_reason;
  if (r.first_token_seconds > 0) {
    st.prefill_seconds = r.first_token_seconds - r.submit_seconds;
    st.decode_seconds = std::max(0.0, r.finish_seconds - r.first_token_seconds);
  }
  if (out.finish_reason == "abort" && out.text.empty())
    history_.erase(history_.end() - 1);  // nothing came: the turn is undone
  else
    history_.push_back({{"role", "assistant"}, {"content", out.text}});
  return st;
}

}  // namespace llmctl
