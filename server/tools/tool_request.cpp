#include "server/tools/tool_request.h"

#include <cctype>

#include "engine/core/error.h"
#include "engine/core/json_bounded.h"
#include "engine/core/json_raw.h"
#include "server/api_error.h"

namespace llmctl::server {

namespace {
using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

// OpenAI's rule for function names: a-z, A-Z, 0-9, underscores, dashes and dots, at most 64.
bool valid_name(const std::string& n) {
  if (n.empty() || n.size() > kMaxToolNameBytes) return false;
  for (unsigned char c : n)
    if (!(std::isalnum(c) || c == '_' || c == '-' || c == '.')) return false;
  return true;
}

void check_tool(const json& t, size_t i) {
  const std::string where = "tools[" + std::to_string(i) + "]";
  if (!t.is_object()) throw ApiError(400, where + " must be an object", "tools");
  for (const auto& [k, v] : t.items())
    if (k != "type" && k != "function") throw ApiError(400, where + "." + k + " is not supported", "tools");
  if (!t.contains("type") || t["type"] != "function")
    throw ApiError(400, where + ".type must be \"function\"", "tools");
  if (!t.contains("function") || !t["function"].is_object())
    throw ApiError(400, where + ".function must be an object", "tools");
  const json& f = t["function"];
  for (const auto& [k, v] : f.items()) {
    if (k == "name") continue;
    if (k == "description" && !v.is_string() && !v.is_null())
      throw ApiError(400, where + ".function.description must be a string", "tools");
    if (k == "parameters" && !v.is_object() && !v.is_null())
      throw ApiError(400, where + ".function.parameters must be a JSON schema object", "tools");
    if (k == "strict" && !v.is_boolean() && !v.is_null())
      throw ApiError(400, where + ".function.strict must be true or false", "tools");
    if (k != "description" && k != "parameters" && k != "strict")
      throw ApiError(400, where + ".function." + k + " is not supported", "tools");
  }
  if (!f.contains("name") || !f["name"].is_string() || !valid_name(f["name"].get<std::string>()))
    throw ApiError(400, where + ".function.name must be 1 to 64 letters, digits, '_', '-' or '.'", "tools");
}
}  // namespace

const ToolSpec* ToolRequest::find(std::string_view name) const {
  for (const auto& t : tools)
    if (t.name == name) return &t;
  return nullptr;
}

bool is_tool_field(const std::string& key) {
  return key == "tools" || key == "tool_choice" || key == "parallel_tool_calls";
}

std::optional<ToolRequest> parse_tool_request(const json& body, std::string_view raw_body) {
  const bool has_tools = body.contains("tools") && !body["tools"].is_null();
  const bool has_choice = body.contains("tool_choice") && !body["tool_choice"].is_null();
  const bool has_parallel = body.contains("parallel_tool_calls") && !body["parallel_tool_calls"].is_null();
  if (!has_tools && !has_choice && !has_parallel) return std::nullopt;
  ToolRequest r;
  if (has_tools) {
    const json& tools = body["tools"];
    if (!tools.is_array()) throw ApiError(400, "field 'tools' must be a list of tools", "tools");
    if (tools.size() > kMaxTools)
      throw ApiError(400, "'tools' lists " + std::to_string(tools.size()) + " tools; at most " + std::to_string(kMaxTools),
                     "tools");
    for (size_t i = 0; i < tools.size(); ++i) check_tool(tools[i], i);
    // Again in the client's order (without the body's text: sorted).
    const auto raw = raw_json_member(raw_body, {"tools"});
    const std::string sorted = raw ? std::string() : tools.dump();
    try {
      r.tools_json = parse_ordered_json_bounded(raw ? *raw : std::string_view(sorted), kRequestJsonLimits, "'tools'");
    } catch (const InputError& e) {
      throw ApiError(400, e.what(), "tools");
    }
    if (!r.tools_json.is_array() || r.tools_json.size() != tools.size())
      throw ApiError(400, "field 'tools' could not be read", "tools");
    for (const auto& t : r.tools_json) {
      ToolSpec s;
      s.name = t["function"]["name"].get<std::string>();
      if (r.find(s.name)) throw ApiError(400, "'tools' declares the function '" + s.name + "' twice", "tools");
      auto p = t["function"].find("parameters");
      s.parameters = p != t["function"].end() && p->is_object() ? *p : ojson{{"type", "object"}, {"properties", ojson::object()}};
      r.tools.push_back(std::move(s));
    }
  }
  if (has_parallel) {
    if (!body["parallel_tool_calls"].is_boolean())
      throw ApiError(400, "field 'parallel_tool_calls' must be true or false", "parallel_tool_calls");
    r.parallel = body["parallel_tool_calls"].get<bool>();
  }
  r.choice = r.tools.empty() ? ToolChoice::none : ToolChoice::automatic;
  if (has_choice) {
    const json& c = body["tool_choice"];
    if (c == "none") {
      r.choice = ToolChoice::none;
    } else if (c == "auto" || c == "required") {
      if (r.tools.empty())
        throw ApiError(400, "tool_choice \"" + c.get<std::string>() + "\" needs 'tools'", "tool_choice");
      r.choice = c == "auto" ? ToolChoice::automatic : ToolChoice::required;
    } else if (c.is_object()) {
      if (!c.contains("type") || c["type"] != "function" || !c.contains("function") || !c["function"].is_object() ||
          !c["function"].contains("name") || !c["function"]["name"].is_string())
        throw ApiError(400, "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}",
                       "tool_choice");
      r.named = c["function"]["name"].get<std::string>();
      if (!r.find(r.named))
        throw ApiError(400, "tool_choice names the function " + quoted_value(r.named) + ", which 'tools' does not declare",
                       "tool_choice");
      r.choice = ToolChoice::named;
    } else {
      throw ApiError(400, "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}",
                     "tool_choice");
    }
  }
  return r;
}

}  // namespace llmctl::server
