// HttpServer: the routes of `llmctl serve` on cpp-httplib. HTTP threads parse and validate,
// submit Jobs to the EngineLoop and stream their events; every error becomes an HTTP 4xx/5xx
// with an OpenAI-shaped JSON body (or, once a stream has started, a `data: {"error": ...}` event).
//
// Routes: POST /v1/completions, /v1/chat/completions, GET /v1/models (OpenAI); POST /generate,
// /generate_stream, GET /info (TGI); POST /tokenize, /detokenize; GET /health, /ready, /metrics.
#pragma once
#include <atomic>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "engine/server/engine_loop.h"
#include "engine/server/metrics.h"
#include "engine/server/openai_api.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace llmctl::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;                        // 0 = any free port (see port())
  std::string api_key;                    // empty = no auth
  int max_concurrent_requests = 64;       // generation requests in flight; beyond: 429
  double request_timeout_s = 600;         // a generation running longer is aborted (0 = none)
  std::string served_model_name = "default";
  size_t max_body_bytes = size_t(4) << 20;
  int max_n = 16;
  std::string model_dtype, device;        // for /info
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
  void handle_openai(OpenAiApi api, const httplib::Request& req, httplib::Response& res);
  void handle_tgi(bool stream, const httplib::Request& req, httplib::Response& res);
  void handle_tokenize(const httplib::Request& req, httplib::Response& res);
  void handle_detokenize(const httplib::Request& req, httplib::Response& res);
  // Counts a generation request against --max-concurrent-requests while the result lives; throws
  // ApiError 429 (with Retry-After set on res) beyond it.
  std::shared_ptr<void> acquire_slot(httplib::Response& res);
  // Submits and waits for accepted/rejected; throws ApiError for a rejection or overload.
  std::shared_ptr<Job> start_job(std::vector<std::vector<int>> prompts, const SamplingParams& params);

  Engine& engine_;
  const Tokenizer& tok_;
  ServerConfig cfg_;
  ModelLimits limits_;
  Metrics metrics_;
  EngineLoop loop_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<int> in_flight_{0};
  std::atomic<bool> stopping_{false};
  int port_ = 0;
};

}  // namespace llmctl::server
