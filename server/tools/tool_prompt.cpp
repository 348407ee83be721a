#include "server/tools/tool_prompt.h"

namespace llmctl::server {

namespace {
using ojson = nlohmann::ordered_json;

std::string tools_system_text(const ToolRequest& r) {
  std::string s =
      "# Tools\n\nYou may call one or more functions to answer the user. The functions, described in JSON Schema, "
      "are inside <tools></tools>:\n<tools>";
  for (const auto& t : r.tools_json) s.append("\n").append(t.dump());
  s += "\n</tools>\n\nTo call a function, write a JSON object with its name and arguments inside "
       "<tool_call></tool_call> tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <arguments-json-object>}\n"
       "</tool_call>";
  return s;
}

std::string calls_text(const ojson& calls) {
  std::string s;
  for (const auto& c : calls) {
    if (!s.empty()) s += "\n";
    s.append("<tool_call>\n{\"name\": ").append(c["function"]["name"].dump());
    s.append(", \"arguments\": ").append(c["function"]["arguments"].dump()).append("}\n</tool_call>");
  }
  return s;
}
}  // namespace

bool template_handles_tools(std::string_view source) { return source.find("tools") != std::string_view::npos; }

ToolChatInput tool_chat_input(ojson messages, const ToolRequest* tools, bool handles) {
  ToolChatInput in;
  const bool offered = tools && !tools->tools.empty();
  if (handles) {
    in.messages = std::move(messages);
    if (offered) in.tools = tools->tools_json;
    return in;
  }
  in.messages = ojson::array();
  if (offered) {
    const std::string text = tools_system_text(*tools);
    if (!messages.empty() && messages[0]["role"] == "system") {
      std::string content = messages[0]["content"].get<std::string>();
      messages[0]["content"] = content.append("\n\n").append(text);
    } else {
      in.messages.push_back({{"role", "system"}, {"content", text}});
    }
  }
  for (auto& m : messages) {
    if (m["role"] == "assistant" && m.contains("tool_calls")) {
      std::string content = m["content"].get<std::string>();
      if (!content.empty()) content.append("\n");
      content.append(calls_text(m["tool_calls"]));
      in.messages.push_back({{"role", "assistant"}, {"content", std::move(content)}});
    } else if (m["role"] == "tool") {
      std::string content = "<tool_response>\n";
      content.append(m["content"].get<std::string>()).append("\n</tool_response>");
      in.messages.push_back({{"role", "user"}, {"content", std::move(content)}});
    } else {
      in.messages.push_back(std::move(m));
    }
  }
  return in;
}

}  // namespace llmctl::server
