// The `messages` of a chat request, checked and shaped for the chat template: text content
// (strings or text parts, joined), `developer` as `system`, assistant turns with `tool_calls`
// (each call's arguments, a JSON text, given to the template as an object in the client's key
// order, as vLLM does) and `tool` results with their `tool_call_id`. Throws ApiError (400,
// "messages").
#pragma once
#include <nlohmann/json.hpp>

namespace llmctl::server {

nlohmann::ordered_json normalize_chat_messages(const nlohmann::json& messages);

}  // namespace llmctl::server
