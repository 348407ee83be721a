// What the chat template receives when a request carries tools. A template that handles tools
// (its source mentions them) gets `tools` as the client wrote them, as transformers passes them.
// A template that shows no sign of tools (SmolLM2's, most base chat templates) would drop them
// silently; it gets them in the system prompt instead, with the call format (Hermes: the format
// tool_call_format_for_template picks for such templates), and past calls and tool results
// written as that format's text, so that any chat model can be offered tools.
#pragma once
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/tools/tool_request.h"

namespace llmctl::server {

bool template_handles_tools(std::string_view template_source);

struct ToolChatInput {
  nlohmann::ordered_json messages;
  nlohmann::ordered_json tools;  // null: no `tools` variable
};

// messages: as normalize_chat_messages returns them.
ToolChatInput tool_chat_input(nlohmann::ordered_json messages, const ToolRequest* tools, bool template_handles_tools);

}  // namespace llmctl::server
