// The tokenize routes of HttpServer: POST /tokenize and POST /detokenize, each within a memory
// budget. They hold a place among --max-concurrent-requests like the generation routes (429
// beyond), their input is bounded while it is parsed (JSON values) and tokenized (tokens), and so
// is their answer: at most max_model_len tokens either way, refused with a 400 that names the limit.
#include <algorithm>
#include <chrono>

#include "server/api_error.h"
#include "server/http/http_types.h"
#include "server/http_server.h"
#include "server/json_body.h"
#include "server/sse.h"
#include "server/token_budget.h"
#include "engine/tokenizer/prompt.h"
#include "server/chat_prompt.h"

namespace llmctl::server {

namespace {
using json = nlohmann::json;

// An optional boolean field of a request body (null = absent).
bool flag(const json& body, const std::string& name, bool absent) {
  if (!body.contains(name) || body[name].is_null()) return absent;
  if (!body[name].is_boolean())
    throw ApiError(400, "field '" + name + "' must be true or false, got " + body[name].type_name(), name);
  return body[name].get<bool>();
}

std::string limit_words(size_t cap) {
  return std::to_string(cap) + " (the model's context length, max_model_len)";
}
}  // namespace

size_t HttpServer::tokenize_cap() const { return size_t(std::max(1, limits_.max_context)); }

// {"prompt": str} or {"messages": [...]} (+ "add_special_tokens", "add_generation_prompt"; with
// messages also "tools" and "chat_template_kwargs", rendered as the chat route renders them)
// -> {"tokens", "count", "max_model_len"}; at most tokenize_cap() tokens.
void HttpServer::handle_tokenize(const HttpRequest& req, HttpResponse& res) {
  const auto start = std::chrono::steady_clock::now();
  auto slot = acquire_slot(res);  // parsing, the chat template and tokenizing count against the limit
  const size_t cap = tokenize_cap();
  // A message is an object with a role and content (a few values each); a text of cap tokens
  // needs no more values than this.
  const json body = parse_json_body(
      req, {8 * cap + 1024, "the request body holds too many JSON values for /tokenize, which answers at most " +
                                limit_words(cap) + " tokens", ""});
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  for (const auto& [k, v] : body.items())
    if (k != "prompt" && k != "messages" && k != "model" && k != "add_special_tokens" && k != "add_generation_prompt" &&
        k != "tools" && k != "chat_template_kwargs")
      throw ApiError(400, "field '" + k + "' is not supported by /tokenize", k);
  if (body.contains("prompt") == body.contains("messages"))
    throw ApiError(400, "give exactly one of \"prompt\" and \"messages\"");
  for (const char* k : {"tools", "chat_template_kwargs"})
    if (body.contains(k) && !body.contains("messages"))
      throw ApiError(400, std::string("field '") + k + "' goes with \"messages\"", k);
  std::string rendered;
  std::string_view text;
  const bool is_prompt = body.contains("prompt");
  bool bos = false;
  if (is_prompt) {
    if (!body["prompt"].is_string()) throw ApiError(400, "'prompt' must be a string", "prompt");
    bos = flag(body, "add_special_tokens", true);
    text = body["prompt"].get_ref<const std::string&>();
  } else {
    const bool gen = flag(body, "add_generation_prompt", true);
    const std::optional<ToolRequest> tools = parse_tool_request(body, req.body);
    rendered = render_chat_request(tok_, body["messages"], tools ? &*tools : nullptr, limits_.template_handles_tools,
                                   parse_template_kwargs(body.value("chat_template_kwargs", json())), gen,
                                   render_limits(start));  // within the request limits
    text = rendered;
  }
  CappedTokens t = encode_capped(tok_, text, true, bos, cap);
  if (t.over)
    throw ApiError(400, std::string(is_prompt ? "the prompt" : "the rendered conversation") + " has " +
                            (t.exact ? std::to_string(t.count) : "more than " + std::to_string(cap)) +
                            " tokens; /tokenize answers at most " + limit_words(cap),
                   is_prompt ? "prompt" : "messages");
  res.set_content(json_text({{"tokens", t.ids}, {"count", t.ids.size()}, {"max_model_len", limits_.max_context}}),
                  "application/json");
}

// {"tokens": [ids]} -> {"prompt": text}; at most tokenize_cap() ids, so the text is at most that
// many times the longest token.
void HttpServer::handle_detokenize(const HttpRequest& req, HttpResponse& res) {
  auto slot = acquire_slot(res);
  const size_t cap = tokenize_cap();
  const json body = parse_json_body(
      req, {cap + 64, "'tokens' lists more than " + std::to_string(cap) + " token ids; /detokenize accepts at most " +
                          limit_words(cap), "tokens"});
  if (!body.is_object() || !body.contains("tokens")) throw ApiError(400, "'tokens' is required", "tokens");
  for (const auto& [k, v] : body.items())
    if (k != "tokens" && k != "model") throw ApiError(400, "field '" + k + "' is not supported by /detokenize", k);
  const json& t = body["tokens"];
  if (!t.is_array()) throw ApiError(400, "'tokens' must be a list of token ids", "tokens");
  if (t.size() > cap)
    throw ApiError(400, "'tokens' lists " + std::to_string(t.size()) + " token ids; /detokenize accepts at most " +
                            limit_words(cap), "tokens");
  std::vector<int> ids;
  ids.reserve(t.size());
  const int vocab = tok_.vocab_size();  // a padded model vocabulary has ids the tokenizer cannot decode
  for (size_t i = 0; i < t.size(); ++i) {
    if (!t[i].is_number_integer()) throw ApiError(400, "tokens[" + std::to_string(i) + "] is not an integer", "tokens");
    const int64_t id = t[i].get<int64_t>();
    if (id < 0 || id >= vocab)
      throw ApiError(400, "tokens[" + std::to_string(i) + "] = " + std::to_string(id) +
                              " is not a token id (vocabulary size " + std::to_string(vocab) + ")", "tokens");
    ids.push_back(int(id));
  }
  res.set_content(json_text({{"prompt", tok_.decode(ids)}}), "application/json");
}

}  // namespace llmctl::server
