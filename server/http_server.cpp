#include "server/http_server.h"

#include <atomic>
#include <chrono>
#include <cstdio>

#include "engine/core/error.h"
#include "server/api_error.h"
#include "server/http/server.h"
#include "server/request_log.h"
#include "server/sse.h"
#include "server/tools/tool_constraint.h"
#include "server/tools/tool_prompt.h"

namespace llmctl::server {

namespace {
using json = nlohmann::json;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void send_error(HttpResponse& res, const ApiError& e) {
  res.status = e.status();
  res.set_content(json_text(e.body()), "application/json");
}
}  // namespace

RequestRecord& current_request() {
  static thread_local RequestRecord record;
  return record;
}

HttpServer::HttpServer(Engine& engine, const Tokenizer& tok, const ModelConfig& model, ServerConfig config)
    : engine_(engine), tok_(tok), cfg_(std::move(config)), loop_(engine_, metrics_) {
  limits_.served_name = cfg_.served_model_name;
  limits_.vocab_size = model.vocab_size;
  grammars_ = std::make_unique<GrammarCompiler>(tok, model.vocab_size, model.eos_token_ids);
  limits_.max_context = engine_.max_context();
  limits_.max_n = cfg_.max_n;
  limits_.reasoning = cfg_.reasoning_parser == "think" ||
                      (cfg_.reasoning_parser == "auto" && tok.chat_template().find("</think>") != std::string::npos);
  tool_format_ = make_tool_call_format(cfg_.tool_call_parser == "auto" ? tool_call_format_for_template(tok.chat_template())
                                                                        : cfg_.tool_call_parser);
  limits_.tool_format = tool_format_.get();
  limits_.template_handles_tools = template_handles_tools(tok.chat_template());
  limits_.tool_trigger_special = is_special_token_text(tok, tool_format_->trigger());
  http::ServerOptions opt;
  // One worker per generation request plus room for short ones; slow or idle connections hold no
  // worker (the I/O thread reads every request whole before a worker sees it).
  opt.workers = cfg_.max_concurrent_requests + 32;
  opt.limits.max_body_bytes = cfg_.max_body_bytes;
  opt.header_timeout_s = cfg_.header_timeout_s;
  http_ = std::make_unique<http::Server>(opt);
  add_routes();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::bind() {
  port_ = http_->bind(cfg_.host, cfg_.port);
  LLM_REQUIRE(port_ > 0) << "cannot listen on " << cfg_.host << ":" << cfg_.port
                         << " (address in use, or not an address of this machine)";
  loop_.start();
}

void HttpServer::serve() { http_->run(); }

void HttpServer::stop() {
  if (stopping_.exchange(true)) return;
  loop_.shutdown();  // in-flight jobs get their final (failed) event, which their streams still write
  http_->stop();     // no new connections or requests; serve() returns once the workers are done
}

void HttpServer::add_routes() {
  http::Server& s = *http_;
  // On the I/O thread, once the head is in: the key is checked before the body is read.
  s.set_precheck([this](const HttpRequest& req) -> std::optional<std::pair<int, std::string>> {
    if (!cfg_.api_key.empty() && req.path != "/health" && req.header("Authorization") != "Bearer " + cfg_.api_key)
      return std::pair<int, std::string>{401, "a valid API key is required: send 'Authorization: Bearer KEY'"};
    return std::nullopt;
  });
  s.set_error_body([](int status, const std::string& message) { return json_text(error_body(status, message)); });
  s.set_logger([this](const HttpRequest& req, const HttpResponse& res) {
    const RequestRecord& r = current_request();
    if (res.status >= 400) metrics_.request_error(res.status);
    std::string line = "llmctl serve: " + (req.method.empty() ? std::string("-") : req.method) + " " +
                       (req.path.empty() ? std::string("-") : req.path) + " " + std::to_string(res.status);
    if (!r.id.empty()) line += " id=" + r.id;
    if (r.prompt_tokens >= 0) line += " prompt_tokens=" + std::to_string(r.prompt_tokens);
    if (r.completion_tokens >= 0) line += " completion_tokens=" + std::to_string(r.completion_tokens);
    char ms[32];
    std::snprintf(ms, sizeof ms, " %.1f ms", r.start_seconds > 0 ? (now_seconds() - r.start_seconds) * 1e3 : 0.0);
    line += ms;
    if (!r.note.empty()) line += " (" + r.note + ")";
    std::fprintf(stderr, "%s\n", line.c_str());
    current_request() = RequestRecord{};  // the I/O thread logs refusals too: leave nothing behind
  });

  // Every handler starts its log record and turns an error into its JSON answer here.
  auto guarded = [](auto fn) {
    return [fn](const HttpRequest& req, HttpResponse& res) {
      static std::atomic<int64_t> counter{0};
      current_request() = RequestRecord{};
      current_request().id = "req-" + std::to_string(++counter);  // OpenAI routes replace it with the response id
      current_request().start_seconds = now_seconds();
      try {
        fn(req, res);
      } catch (const ApiError& e) {
        send_error(res, e);
      } catch (const InputError& e) {
        send_error(res, to_api_error(e));
      } catch (const nlohmann::json::exception& e) {  // a value of the wrong type
        send_error(res, ApiError(400, std::string("bad request: ") + e.what()));
      } catch (const std::exception& e) {
        send_error(res, ApiError(500, std::string("internal error: ") + e.what()));
      }
    };
  };
  s.route("POST", "/v1/completions", guarded([this](auto& q, auto& r) { handle_openai(OpenAiApi::completions, q, r); }));
  s.route("POST", "/v1/chat/completions", guarded([this](auto& q, auto& r) { handle_openai(OpenAiApi::chat, q, r); }));
  s.route("POST", "/generate", guarded([this](auto& q, auto& r) { handle_tgi(false, q, r); }));
  s.route("POST", "/generate_stream", guarded([this](auto& q, auto& r) { handle_tgi(true, q, r); }));
  s.route("POST", "/tokenize", guarded([this](auto& q, auto& r) { handle_tokenize(q, r); }));
  s.route("POST", "/detokenize", guarded([this](auto& q, auto& r) { handle_detokenize(q, r); }));
  s.route("GET", "/v1/models", guarded([this](const HttpRequest&, HttpResponse& res) {
    json model = {{"id", cfg_.served_model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "llmctl"},
                  {"max_model_len", limits_.max_context}};
    res.set_content(json_text({{"object", "list"}, {"data", json::array({model})}}), "application/json");
  }));
  s.route("GET", "/info", guarded([this](const HttpRequest&, HttpResponse& res) {
    res.set_content(json_text({{"model_id", cfg_.served_model_name},
                               {"model_dtype", cfg_.model_dtype},
                               {"model_device_type", cfg_.device},
                               {"max_concurrent_requests", cfg_.max_concurrent_requests},
                               {"max_best_of", cfg_.max_n},
                               {"max_stop_sequences", 16},
                               {"max_input_tokens", limits_.max_context - 1},
                               {"max_input_length", limits_.max_context - 1},
                               {"max_total_tokens", limits_.max_context},
                               {"version", "0.1.0"},
                               {"router", "llmctl"}}),
                    "application/json");
  }));
  s.route("GET", "/health", [](const HttpRequest&, HttpResponse& res) { res.set_content("{}", "application/json"); });
  s.route("GET", "/ready", guarded([this](const HttpRequest&, HttpResponse& res) {
    if (!loop_.ready() || stopping_)
      throw ApiError(503, stopping_ ? "the server is shutting down" : "the model is not ready yet");
    res.set_content(json_text({{"status", "ready"}}), "application/json");
  }));
  s.route("GET", "/metrics", [this](const HttpRequest&, HttpResponse& res) {
    const GrammarCompilerStats grammars = grammars_->stats();
    res.set_content(metrics_.render(grammars), "text/plain; version=0.0.4; charset=utf-8");
  });
}

}  // namespace llmctl::server
