#include "server/json_body.h"

#include "engine/core/json_bounded.h"
#include "engine/core/utf8.h"
#include "server/api_error.h"
#include "server/http/http_types.h"

namespace llmctl::server {

namespace {
using json = nlohmann::json;

// A first pass over the body that builds nothing: it counts values and nesting and stops at the
// first excess. Then the DOM is built by nlohmann's plain parser. Not with a parse callback:
// nlohmann's callback parser scans the whole enclosing array each time an object in it ends, so a
// body of n objects in a list costs n^2 / 2 steps (a 800 KB `{"messages": [{}, {}, ...]}` took 15 s).
class Scan : public nlohmann::json_sax<json> {
 public:
  Scan(size_t max_values, int max_depth) : max_values_(max_values), max_depth_(max_depth) {}
  enum class Stop { none, values, depth, syntax } stop = Stop::none;
  std::string syntax_error;

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(); }
  bool key(string_t&) override { return true; }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    stop = Stop::syntax;
    syntax_error = e.what();
    return false;
  }

 private:
  bool value() {
    if (++values_ <= max_values_) return true;
    stop = Stop::values;
    return false;
  }
  bool open() {
    if (depth_ >= max_depth_) {  // `[]` is one level: the container opened at depth max_depth is too deep
      stop = Stop::depth;
      return false;
    }
    ++depth_;
    return value();
  }
  bool close() {
    --depth_;
    return true;
  }
  size_t max_values_, values_ = 0;
  int max_depth_, depth_ = 0;
};
}  // namespace

json parse_json_body(const http::HttpRequest& req, const JsonBudget& budget) {
  const std::string what = "the request body";
  if (req.body.empty()) throw ApiError(400, what + " is empty; a JSON object is expected");
  if (!utf8_valid(req.body)) throw ApiError(400, what + " is not valid UTF-8");
  const JsonLimits& limits = kRequestJsonLimits;
  if (req.body.size() > limits.max_bytes)
    throw ApiError(400, what + " is " + std::to_string(req.body.size()) + " bytes, over the limit of " +
                            std::to_string(limits.max_bytes) + " bytes");
  Scan scan(budget.max_values, limits.max_depth);
  json::sax_parse(req.body, &scan);
  switch (scan.stop) {
    case Scan::Stop::values: throw ApiError(400, budget.message, budget.param);
    case Scan::Stop::depth:
      throw ApiError(400, what + " is nested deeper than " + std::to_string(limits.max_depth) + " levels of arrays/objects");
    case Scan::Stop::syntax: throw ApiError(400, what + " is not valid JSON: " + scan.syntax_error);
    case Scan::Stop::none: break;
  }
  try {
    return json::parse(req.body);
  } catch (const json::exception& e) {
    throw ApiError(400, what + " is not valid JSON: " + e.what());
  }
}

}  // namespace llmctl::server
