// The tool fields of a chat request (OpenAI): `tools`, `tool_choice`, `parallel_tool_calls`,
// validated and kept in the order the client wrote them (templates print the tools' schemas with
// `tojson`; they must read as the client wrote them).
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace llmctl::server {

struct ToolSpec {
  std::string name;
  nlohmann::ordered_json parameters;  // the function's JSON schema ({"type": "object", ...})
};

enum class ToolChoice { none, automatic, required, named };

struct ToolRequest {
  std::vector<ToolSpec> tools;
  nlohmann::ordered_json tools_json;  // `tools` as the client wrote it, for the chat template
  ToolChoice choice = ToolChoice::automatic;
  std::string named;  // choice == named: the function
  bool parallel = true;

  const ToolSpec* find(std::string_view name) const;
  // Whether the output is parsed for calls (tools given and tool_choice is not "none").
  bool parses() const { return !tools.empty() && choice != ToolChoice::none; }
};

// Limits on what a request may declare.
inline constexpr size_t kMaxTools = 128;
inline constexpr size_t kMaxToolNameBytes = 64;

bool is_tool_field(const std::string& key);

// The request's tool fields (nullopt when it has none). `raw_body` is the body's text, from which
// `tools` is read again in order. Throws ApiError (400 naming the field).
std::optional<ToolRequest> parse_tool_request(const nlohmann::json& body, std::string_view raw_body);

}  // namespace llmctl::server
