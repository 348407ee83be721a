#include "engine/tokenizer/prompt.h"

#include "engine/core/error.h"
#include "engine/core/json_bounded.h"
#include "engine/tokenizer/chat_template.h"

namespace llmctl {

std::string render_chat(const Tokenizer& tok, const nlohmann::json& messages, bool add_generation_prompt,
                        const RenderLimits& limits, const nlohmann::json& extra) {
  LLM_REQUIRE(extra.is_object()) << "chat_template_kwargs must be an object";
  return render_chat_ordered(tok, parse_ordered_json_bounded(messages.dump(), kRequestJsonLimits, "the messages"),
                             add_generation_prompt, limits,
                             parse_ordered_json_bounded(extra.dump(), kRequestJsonLimits, "chat_template_kwargs"));
}

std::string render_chat_ordered(const Tokenizer& tok, const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                const RenderLimits& limits, const nlohmann::ordered_json& extra) {
  const ChatTemplate& tmpl = tok.compiled_chat_template();
  LLM_REQUIRE(messages.is_array() && !messages.empty()) << "a chat needs at least one message";
  // transformers' context: tools and documents none when absent (so `tools is defined` holds),
  // and a special token only when the tokenizer has one (Qwen's bos_token is undefined there).
  nlohmann::ordered_json ctx;
  ctx["messages"] = messages;
  ctx["tools"] = nullptr;
  ctx["documents"] = nullptr;
  ctx["add_generation_prompt"] = add_generation_prompt;
  if (tok.bos_id() >= 0) ctx["bos_token"] = tok.token_text(tok.bos_id());
  if (tok.eos_id() >= 0) ctx["eos_token"] = tok.token_text(tok.eos_id());
  LLM_REQUIRE(extra.is_object()) << "chat_template_kwargs must be an object";
  for (const auto& [k, v] : extra.items()) {
    LLM_REQUIRE(k != "messages") << "chat_template_kwargs may not set 'messages'";
    ctx[k] = v;
  }
  return tmpl.render(ctx, limits);
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

std::vector<int> prompt_from_json(const Tokenizer& tok, const nlohmann::json& value, int vocab,
                                  const std::string& field) {
  if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    LLM_REQUIRE(!text.empty()) << "\"" << field << "\" is empty";
    return encode_prompt(tok, text);
  }
  LLM_REQUIRE(value.is_array()) << "\"" << field << "\" must be a string or an array of token ids";
  LLM_REQUIRE(!value.empty()) << "\"" << field << "\" is empty";
  std::vector<int> ids;
  ids.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    const nlohmann::json& t = value[i];
    LLM_REQUIRE(t.is_number_integer()) << "\"" << field << "\"[" << i << "] is not an integer token id";
    const int64_t id = t.get<int64_t>();
    LLM_REQUIRE(id >= 0 && id < vocab) << "\"" << field << "\"[" << i << "] = " << id << " is not a token id (vocabulary size "
                                       << vocab << ")";
    ids.push_back(int(id));
  }
  return ids;
}

}  // namespace llmctl
