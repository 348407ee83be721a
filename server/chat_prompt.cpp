#include "server/chat_prompt.h"

#include "engine/core/error.h"
#include "engine/core/json_bounded.h"
#include "server/api_error.h"
#include "server/chat_messages.h"
#include "server/tools/tool_prompt.h"

namespace llmctl::server {

nlohmann::ordered_json parse_template_kwargs(const nlohmann::json& value) {
  if (value.is_null()) return nlohmann::ordered_json::object();
  if (!value.is_object()) throw ApiError(400, "field 'chat_template_kwargs' must be an object", "chat_template_kwargs");
  try {
    return parse_ordered_json_bounded(value.dump(), kRequestJsonLimits, "field 'chat_template_kwargs'");
  } catch (const InputError& e) {
    throw ApiError(400, e.what(), "chat_template_kwargs");
  }
}

std::string render_chat_request(const Tokenizer& tok, const nlohmann::json& messages, const ToolRequest* tools,
                                bool template_handles_tools, nlohmann::ordered_json template_kwargs,
                                bool add_generation_prompt, const RenderLimits& render) {
  try {
    ToolChatInput in = tool_chat_input(normalize_chat_messages(messages), tools, template_handles_tools);
    nlohmann::ordered_json extra = nlohmann::ordered_json::object();
    if (!in.tools.is_null()) extra["tools"] = std::move(in.tools);
    for (auto& [k, v] : template_kwargs.items()) {
      if (k == "tools" && extra.contains("tools")) continue;  // the request's own tools win
      extra[k] = std::move(v);
    }
    return render_chat_ordered(tok, in.messages, add_generation_prompt, render, extra);
  } catch (const InputError& e) {
    throw ApiError(400, e.what(), "messages");
  }
}

}  // namespace llmctl::server
