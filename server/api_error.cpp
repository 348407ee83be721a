#include "server/api_error.h"

#include <algorithm>
#include <regex>

namespace llmctl::server {

namespace {
std::string type_for(int status) {
  if (status == 401) return "authentication_error";
  if (status == 429) return "rate_limit_error";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

std::string code_for(int status, const std::string& message) {
  switch (status) {
    case 401: return "invalid_api_key";
    case 404: return "not_found";
    case 405: return "method_not_allowed";
    case 408: return "timeout";
    case 413: return "payload_too_large";
    case 429: return "too_many_requests";
    case 503: return "unavailable";
    default: break;
  }
  if (status >= 500) return "internal_error";
  if (message.find("context") != std::string::npos) return "context_length_exceeded";
  return "invalid_value";
}
}  // namespace

std::string ApiError::type() const { return type_.empty() ? type_for(status_) : type_; }
std::string ApiError::code() const { return code_for(status_, message_); }

nlohmann::json ApiError::body() const {
  return {{"error",
           {{"message", message_},
            {"type", type()},
            {"param", param_.empty() ? nlohmann::json() : nlohmann::json(param_)},
            {"code", code()}}}};
}

nlohmann::json error_body(int status, const std::string& message, const std::string& param, const std::string& type) {
  return ApiError(status, message, param, type).body();
}

std::string quoted_value(const std::string& value, size_t max_bytes) {
  size_t n = std::min(value.size(), max_bytes);
  while (n > 0 && n < value.size() && (static_cast<unsigned char>(value[n]) & 0xC0) == 0x80) --n;
  const std::string escaped =
      nlohmann::json(value.substr(0, n)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out = "'";
  if (escaped.size() >= 2) out.append(escaped, 1, escaped.size() - 2);  // without the JSON quotes
  if (n < value.size()) out += "... (" + std::to_string(value.size()) + " bytes)";
  return out + "'";
}

ApiError to_api_error(const std::exception& e) {
  const std::string msg = e.what();
  static const std::regex quoted("(?:field|\"|')([a-z_]+)(?:'|\")");
  std::smatch m;
  std::string param;
  static const std::regex leading("^([a-z]+_[a-z_]+|[a-z]+) (must|is|are) ");  // "top_k must be ..."
  static const std::regex prefixed("^([a-z]+_[a-z_]+): ");  // "logit_bias: token id 300 is ..."
  if (std::regex_search(msg, m, quoted) || std::regex_search(msg, m, leading) || std::regex_search(msg, m, prefixed))
    param = m[1];
  return ApiError(400, msg, param);
}

}  // namespace llmctl::server
