// A chat request's prompt text: its messages (chat_messages.h), its tools (as the template takes
// them, or in the system prompt where it does not: tools/tool_prompt.h) and chat_template_kwargs,
// rendered by the model's template. The chat route and /tokenize both render through here, so
// /tokenize counts the tokens the chat route would run.
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/prompt.h"
#include "server/tools/tool_request.h"

namespace llmctl::server {

// `chat_template_kwargs` as the template reads it (keys in the client's order, bounded); null is an
// empty object. Throws ApiError (400 naming the field).
nlohmann::ordered_json parse_template_kwargs(const nlohmann::json& value);

// tools: the request's (null: none). A `tools` among template_kwargs gives way to the request's own.
// Throws ApiError (400 naming "messages") for messages or a template the render refuses.
std::string render_chat_request(const Tokenizer& tok, const nlohmann::json& messages, const ToolRequest* tools,
                                bool template_handles_tools, nlohmann::ordered_json template_kwargs,
                                bool add_generation_prompt, const RenderLimits& render);

}  // namespace llmctl::server
