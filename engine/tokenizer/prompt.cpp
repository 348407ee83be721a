#include "engine/tokenizer/prompt.h"

#include "engine/core/error.h"
#include "engine/tokenizer/chat_template.h"

namespace llmctl {

std::string render_chat(const Tokenizer& tok, const nlohmann::json& messages, bool add_generation_prompt) {
  LLM_REQUIRE(!tok.chat_template().empty()) << "this model has no chat template; use a plain prompt";
  LLM_REQUIRE(messages.is_array() && !messages.empty()) << "a chat needs at least one message";
  nlohmann::json ctx = {{"messages", messages}, {"add_generation_prompt", add_generation_prompt}};
  ctx["bos_token"] = tok.bos_id() >= 0 ? tok.token_text(tok.bos_id()) : "";
  ctx["eos_token"] = tok.eos_id() >= 0 ? tok.token_text(tok.eos_id()) : "";
  return render_chat_template(tok.chat_template(), ctx);
}

std::vector<int> encode_prompt(const Tokenizer& tok, const std::string& text) {
  std::vector<int> ids;
  if (tok.add_bos() && tok.bos_id() >= 0) ids.push_back(tok.bos_id());
  std::vector<int> body = tok.encode(text, true);
  ids.insert(ids.end(), body.begin(), body.end());
  return ids;
}

std::vector<int> encode_chat(const Tokenizer& tok, const nlohmann::json& messages) {
  // The template writes BOS itself where the model wants it, so nothing is added here.
  return tok.encode(render_chat(tok, messages), true);
}

}  // namespace llmctl
