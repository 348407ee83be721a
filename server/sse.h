// Server-Sent Events framing. JSON is written with invalid UTF-8 replaced (token strings in
// logprobs may be partial code points); streamed text itself is always whole code points.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace llmctl::server {

inline std::string json_text(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

inline std::string sse_event(const nlohmann::json& j) { return "data: " + json_text(j) + "\n\n"; }
inline std::string sse_done() { return "data: [DONE]\n\n"; }

}  // namespace llmctl::server
