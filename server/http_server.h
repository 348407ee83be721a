// HttpServer: the routes of `llmctl serve` on the HTTP layer in http/. Worker threads parse and validate,
// submit Jobs to the EngineLoop and stream their events; every error becomes an HTTP 4xx/5xx
// with an OpenAI-shaped JSON body (or, once a stream has started, a `data: {"error": ...}` event).
//
// Routes: POST /v1/completions, /v1/chat/completions, GET /v1/models (OpenAI); POST /generate,
// /generate_stream, GET /info (TGI); POST /tokenize, /detokenize (tokenize_routes.cpp); GET /health,
// /ready, /metrics.
#pragma once
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "engine/engine.h"
#include "engine/structured/grammar_compiler.h"
#include "server/engine_loop.h"
#include "server/json_body.h"
#include "server/metrics.h"
#include "server/openai_api.h"

namespace llmctl::server {

namespace http {
class Server;
struct HttpRequest;
struct HttpResponse;
}  // namespace http
using http::HttpRequest;
using http::HttpResponse;

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;                        // 0 = any free port (see port())
  std::string api_key;                    // empty = no auth
  int max_concurrent_requests = 64;       // generation and tokenize requests in flight; beyond: 429
  double request_timeout_s = 600;         // a generation running longer is aborted (0 = none)
  std::string served_model_name = "default";
  size_t max_body_bytes = size_t(4) << 20;  // chunked bodies included, counted while read
  double header_timeout_s = 10;             // a request's head must arrive within this (408)
  int max_n = 16;
  std::string model_dtype, device;        // for /info
  // Chat: <think> blocks as reasoning_content: "think" (on), "none" (off), "auto" (on when the chat
  // template writes </think>).
  std::string reasoning_parser = "auto";
  // Chat with tools: how the model writes calls ("auto": from the chat template; or a name that
  // make_tool_call_format takes, server/tools/tool_call_format.h).
  std::string tool_call_parser = "auto";
};

class HttpServer {
 public:
  HttpServer(Engine& engine, const Tokenizer& tok, const ModelConfig& model, ServerConfig config);
  ~HttpServer();
  // Binds (throws InputError when it cannot) and starts the engine thread.
  void bind();
  int port() const { return port_; }
  // Serves until stop(); returns after in-flight requests have ended.
  void serve();
  // Ends in-flight streams with a final event, stops accepting; safe from any thread.
  void stop();

 private:
  void add_routes();
  void handle_openai(OpenAiApi api, const HttpRequest& req, HttpResponse& res);
  void handle_tgi(bool stream, const HttpRequest& req, HttpResponse& res);
  void handle_tokenize(const HttpRequest& req, HttpResponse& res);
  void handle_detokenize(const HttpRequest& req, HttpResponse& res);
  // The most tokens /tokenize answers and /detokenize accepts: the model's context length.
  size_t tokenize_cap() const;
  // Counts a generation or tokenize request against --max-concurrent-requests while the result
  // lives; throws ApiError 429 (with Retry-After set on res) beyond it. Taken before the body is
  // parsed, so that its parsing, chat template and tokenizing all count against the limit.
  std::shared_ptr<void> acquire_slot(HttpResponse& res);
  // Submits and waits for accepted/rejected; throws ApiError for a rejection or overload. The job's
  // timeout is what is left of --request-timeout since `start`.
  std::shared_ptr<Job> start_job(std::vector<std::vector<int>> prompts, const SamplingParams& params,
                                 std::chrono::steady_clock::time_point start);
  // Structured output: compiles the request's constraint (if any) into params; ApiError 400 naming
  // the field when it cannot be used.
  void constrain(SamplingParams& params, const std::optional<ConstraintSpec>& spec);
  // Chat templates of a request started at `start`: its deadline, and stopped by shutdown.
  RenderLimits render_limits(std::chrono::steady_clock::time_point start) const;

  Engine& engine_;
  const Tokenizer& tok_;
  ServerConfig cfg_;
  ModelLimits limits_;
  Metrics metrics_;
  EngineLoop loop_;
  std::unique_ptr<http::Server> http_;
  std::unique_ptr<GrammarCompiler> grammars_;  // structured output (its tables built on first use)
  std::unique_ptr<ToolCallFormat> tool_format_;  // how the model writes tool calls
  std::atomic<int> in_flight_{0};
  std::atomic<bool> stopping_{false};
  int port_ = 0;
};

}  // namespace llmctl::server
