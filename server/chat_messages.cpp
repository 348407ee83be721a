#include "server/chat_messages.h"

#include "engine/core/error.h"
#include "engine/core/json_bounded.h"
#include "server/api_error.h"
#include "server/tools/tool_request.h"

namespace llmctl::server {

namespace {
using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

// A message's content: a string, or a list of {"type": "text", "text": ...} parts (joined).
std::string message_text(const json& content, const std::string& where) {
  const std::string field = where + ".content";
  if (content.is_string()) return content.get<std::string>();
  if (content.is_null()) return "";
  if (!content.is_array()) throw ApiError(400, field + " must be a string or a list of text parts", "messages");
  std::string text;
  for (const auto& part : content) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
        !part["text"].is_string())
      throw ApiError(400, field + ": only parts of type \"text\" with a string \"text\" are supported", "messages");
    text += part["text"].get<std::string>();
  }
  return text;
}

// One assistant tool call: {id, type: "function", function: {name, arguments: "<JSON object>"}}.
ojson tool_call(const json& c, const std::string& where) {
  if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
    throw ApiError(400, where + " must be an object with a \"function\"", "messages");
  if (c.contains("type") && c["type"] != "function") throw ApiError(400, where + ".type must be \"function\"", "messages");
  const json& f = c["function"];
  if (!f.contains("name") || !f["name"].is_string() || f["name"].get_ref<const std::string&>().empty() ||
      f["name"].get_ref<const std::string&>().size() > kMaxToolNameBytes)
    throw ApiError(400, where + ".function.name must be a function's name", "messages");
  if (!f.contains("arguments") || !f["arguments"].is_string())
    throw ApiError(400, where + ".function.arguments must be a string (a JSON object)", "messages");
  const std::string& text = f["arguments"].get_ref<const std::string&>();
  ojson args;
  try {
    args = parse_ordered_json_bounded(text, kRequestJsonLimits, where + ".function.arguments");
    if (!args.is_object()) throw InputError(where + ".function.arguments must be a JSON object");
  } catch (const InputError& e) {
    throw ApiError(400, e.what(), "messages");
  }
  ojson out = ojson::object();
  if (c.contains("id")) {
    if (!c["id"].is_string()) throw ApiError(400, where + ".id must be a string", "messages");
    out["id"] = c["id"].get<std::string>();
  }
  out["type"] = "function";
  out["function"] = {{"name", f["name"].get<std::string>()}, {"arguments", std::move(args)}};
  return out;
}
}  // namespace

ojson normalize_chat_messages(const json& messages) {
  if (!messages.is_array() || messages.empty())
    throw ApiError(400, "'messages' must be a non-empty list of messages", "messages");
  ojson out = ojson::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      throw ApiError(400, where + " must be an object with a string \"role\"", "messages");
    std::string role = m["role"].get<std::string>();
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant" && role != "tool")
      throw ApiError(400, where + ".role '" + role + "' is not supported (system, developer, user, assistant, tool)",
                     "messages");
    for (const auto& [k, v] : m.items()) {
      const bool known = k == "role" || k == "content" || k == "name" || (k == "tool_calls" && role == "assistant") ||
                         (k == "tool_call_id" && role == "tool");
      if (!known && !v.is_null()) throw ApiError(400, where + "." + k + " is not supported", "messages");
    }
    const bool calls = role == "assistant" && m.contains("tool_calls") && !m["tool_calls"].is_null();
    if (!m.contains("content") && !calls) throw ApiError(400, where + " has no \"content\"", "messages");
    ojson msg = {{"role", role}, {"content", message_text(m.value("content", json()), where)}};
    if (calls) {
      const json& tc = m["tool_calls"];
      if (!tc.is_array() || tc.size() > kMaxTools)
        throw ApiError(400, where + ".tool_calls must be a list of at most " + std::to_string(kMaxTools) + " calls",
                       "messages");
      ojson list = ojson::array();
      for (size_t j = 0; j < tc.size(); ++j) list.push_back(tool_call(tc[j], where + ".tool_calls[" + std::to_string(j) + "]"));
      msg["tool_calls"] = std::move(list);
    }
    if (role == "tool") {
      if (!m.contains("tool_call_id") || !m["tool_call_id"].is_string())
        throw ApiError(400, where + ".tool_call_id must be the id of the call this message answers", "messages");
      msg["tool_call_id"] = m["tool_call_id"].get<std::string>();
    }
    out.push_back(std::move(msg));
  }
  return out;
}

}  // namespace llmctl::server
