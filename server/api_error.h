// Errors a route answers with: an HTTP status and an OpenAI-shaped body
// {"error": {"message", "type", "param", "code"}}. Thrown by request parsing and caught by the
// HTTP layer; an InputError from the engine becomes a 400 (see to_api_error).
#pragma once
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace llmctl::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = "", std::string type = "")
      : std::runtime_error(message), status_(status), message_(std::move(message)), param_(std::move(param)),
        type_(std::move(type)) {}
  int status() const { return status_; }
  // The whole message (what() stops at a NUL byte; the body carries every byte, JSON-escaped).
  const std::string& message() const { return message_; }
  const std::string& param() const { return param_; }
  // invalid_request_error (4xx), authentication_error (401), rate_limit_error (429), server_error (5xx)
  std::string type() const;
  std::string code() const;  // a short stable code, e.g. "invalid_value", "context_length_exceeded"
  nlohmann::json body() const;

 private:
  int status_;
  std::string message_, param_, type_;
};

// A client's value quoted in a message: 'value' JSON-escaped (a NUL is \u0000, not the end of the
// message), cut at a code point boundary after max_bytes with "... (N bytes)".
std::string quoted_value(const std::string& value, size_t max_bytes = 256);

// An engine InputError as a 400, with the field it names (if the message quotes one) as param.
ApiError to_api_error(const std::exception& e);

// The OpenAI error body for any status and message.
nlohmann::json error_body(int status, const std::string& message, const std::string& param = "",
                          const std::string& type = "");

}  // namespace llmctl::server
