// Request bodies as JSON, whatever their Content-Type: valid UTF-8, nested at most
// kRequestJsonLimits.max_depth deep and, for the routes whose input is bounded anyway (/tokenize,
// /detokenize), holding at most a budget of JSON values counted while parsing. A parsed value
// costs 16 to ~100 bytes however short its text (a 4 MB body of `[1,1,...]` is a 32 MB DOM, of
// `[{},{},...]` over 100 MB), so excess is refused before the DOM is built, not after. Depth and
// values are checked by a first pass that builds nothing; the DOM is then built without a parse
// callback, whose cost grows with the square of the objects in a list (json_body.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace llmctl::server {

namespace http {
struct HttpRequest;
}

struct JsonBudget {
  size_t max_values = SIZE_MAX;  // scalars, arrays and objects together
  // The 400 answered when the body holds more (message and param).
  std::string message = "the request body holds too many JSON values", param;
};

// ApiError 400 when the body is empty, not UTF-8, not JSON, nested too deep or over `budget`.
nlohmann::json parse_json_body(const http::HttpRequest& req, const JsonBudget& budget = {});

}  // namespace llmctl::server
