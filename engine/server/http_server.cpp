#include "engine/server/http_server.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include <httplib.h>

#include "engine/core/error.h"
#include "engine/core/utf8.h"
#include "engine/server/api_error.h"
#include "engine/server/request_log.h"
#include "engine/server/sse.h"
#include "engine/tokenizer/prompt.h"

namespace llmctl::server {

namespace {
using json = nlohmann::json;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status();
  res.set_content(json_text(e.body()), "application/json");
}

const char* default_message(int status) {
  switch (status) {
    case 400: return "the request could not be parsed";
    case 404: return "no such route";
    case 405: return "method not allowed on this route";
    case 408: return "the request was not received in time";
    case 413: return "the request body is over the server's size limit";
    case 414: return "the request URI is too long";
    default: return status >= 500 ? "internal server error" : "bad request";
  }
}

json parse_json_body(const httplib::Request& req) {
  if (!utf8_valid(req.body)) throw ApiError(400, "the request body is not valid UTF-8");
  try {
    return json::parse(req.body);
  } catch (const json::exception& e) {
    throw ApiError(400, std::string("the request body is not valid JSON: ") + e.what());
  }
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
  limits_.max_context = engine_.max_context();
  limits_.max_n = cfg_.max_n;
  http_ = std::make_unique<httplib::Server>();
  // One worker per streamed request plus room for short requests and slow or idle connections.
  const size_t workers = size_t(cfg_.max_concurrent_requests) + 32;
  http_->new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
  http_->set_payload_max_length(cfg_.max_body_bytes);
  http_->set_read_timeout(10);
  http_->set_write_timeout(10);
  http_->set_keep_alive_timeout(5);
  add_routes();
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::bind() {
  if (cfg_.port == 0)
    port_ = http_->bind_to_any_port(cfg_.host);
  else
    port_ = http_->bind_to_port(cfg_.host, cfg_.port) ? cfg_.port : -1;
  LLM_REQUIRE(port_ > 0) << "cannot listen on " << cfg_.host << ":" << cfg_.port
                         << " (address in use, or not an address of this machine)";
  loop_.start();
}

void HttpServer::serve() { http_->listen_after_bind(); }

void HttpServer::stop() {
  if (stopping_.exchange(true)) return;
  loop_.shutdown();  // in-flight jobs get their final (failed) event
  // httplib stops driving stream providers once the server is stopped: let the streams write
  // their final event first (bounded, in case a client does not read).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (in_flight_ > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  http_->stop();
}

void HttpServer::add_routes() {
  httplib::Server& s = *http_;
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    static std::atomic<int64_t> counter{0};
    current_request() = RequestRecord{};
    current_request().id = "req-" + std::to_string(++counter);  // OpenAI routes replace it with the response id
    current_request().start_seconds = now_seconds();
    if (!cfg_.api_key.empty() && req.path != "/health" &&
        req.get_header_value("Authorization") != "Bearer " + cfg_.api_key) {
      send_error(res, ApiError(401, "a valid API key is required: send 'Authorization: Bearer KEY'"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  s.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty()) res.set_content(json_text(error_body(res.status, default_message(res.status))), "application/json");
  });
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      send_error(res, ApiError(500, std::string("internal error: ") + e.what()));
    } catch (...) {
      send_error(res, ApiError(500, "internal error"));
    }
  });
  s.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    const RequestRecord& r = current_request();
    if (res.status >= 400) metrics_.request_error(res.status);
    std::string line = "llmctl serve: " + req.method + " " + req.path + " " + std::to_string(res.status);
    if (!r.id.empty()) line += " id=" + r.id;
    if (r.prompt_tokens >= 0) line += " prompt_tokens=" + std::to_string(r.prompt_tokens);
    if (r.completion_tokens >= 0) line += " completion_tokens=" + std::to_string(r.completion_tokens);
    char ms[32];
    std::snprintf(ms, sizeof ms, " %.1f ms", r.start_seconds > 0 ? (now_seconds() - r.start_seconds) * 1e3 : 0.0);
    line += ms;
    if (!r.note.empty()) line += " (" + r.note + ")";
    std::fprintf(stderr, "%s\n", line.c_str());
  });

  // Every handler turns an error into its JSON answer here.
  auto guarded = [](auto fn) {
    return [fn](const httplib::Request& req, httplib::Response& res) {
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
  s.Post("/v1/completions", guarded([this](auto& q, auto& r) { handle_openai(OpenAiApi::completions, q, r); }));
  s.Post("/v1/chat/completions", guarded([this](auto& q, auto& r) { handle_openai(OpenAiApi::chat, q, r); }));
  s.Post("/generate", guarded([this](auto& q, auto& r) { handle_tgi(false, q, r); }));
  s.Post("/generate_stream", guarded([this](auto& q, auto& r) { handle_tgi(true, q, r); }));
  s.Post("/tokenize", guarded([this](auto& q, auto& r) { handle_tokenize(q, r); }));
  s.Post("/detokenize", guarded([this](auto& q, auto& r) { handle_detokenize(q, r); }));
  s.Get("/v1/models", guarded([this](const httplib::Request&, httplib::Response& res) {
    json model = {{"id", cfg_.served_model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "llmctl"},
                  {"max_model_len", limits_.max_context}};
    res.set_content(json_text({{"object", "list"}, {"data", json::array({model})}}), "application/json");
  }));
  s.Get("/info", guarded([this](const httplib::Request&, httplib::Response& res) {
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
  s.Get("/health", [](const httplib::Request&, httplib::Response& res) { res.set_content("{}", "application/json"); });
  s.Get("/ready", [this](const httplib::Request&, httplib::Response& res) {
    if (loop_.ready() && !stopping_) {
      res.set_content(json_text({{"status", "ready"}}), "application/json");
    } else {
      send_error(res, ApiError(503, stopping_ ? "the server is shutting down" : "the model is not ready yet"));
    }
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(), "text/plain; version=0.0.4; charset=utf-8");
  });
}

// {"prompt": str | [ids]} or {"messages": [...]} (+ "add_special_tokens", "add_generation_prompt")
void HttpServer::handle_tokenize(const httplib::Request& req, httplib::Response& res) {
  const json body = parse_json_body(req);
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  for (const auto& [k, v] : body.items())
    if (k != "prompt" && k != "messages" && k != "model" && k != "add_special_tokens" && k != "add_generation_prompt")
      throw ApiError(400, "field '" + k + "' is not supported by /tokenize", k);
  if (body.contains("prompt") == body.contains("messages"))
    throw ApiError(400, "give exactly one of \"prompt\" and \"messages\"");
  std::vector<int> ids;
  if (body.contains("prompt")) {
    if (!body["prompt"].is_string()) throw ApiError(400, "'prompt' must be a string", "prompt");
    const bool special = body.value("add_special_tokens", true);
    const std::string& text = body["prompt"].get_ref<const std::string&>();
    ids = special ? encode_prompt(tok_, text) : tok_.encode(text, true);
  } else {
    const bool gen = body.value("add_generation_prompt", true);
    ids = tok_.encode(render_chat(tok_, body["messages"], gen), true);
  }
  res.set_content(json_text({{"tokens", ids}, {"count", ids.size()}, {"max_model_len", limits_.max_context}}),
                  "application/json");
}

// {"tokens": [ids]} -> {"prompt": text}
void HttpServer::handle_detokenize(const httplib::Request& req, httplib::Response& res) {
  const json body = parse_json_body(req);
  if (!body.is_object() || !body.contains("tokens")) throw ApiError(400, "'tokens' is required", "tokens");
  for (const auto& [k, v] : body.items())
    if (k != "tokens" && k != "model") throw ApiError(400, "field '" + k + "' is not supported by /detokenize", k);
  const json& t = body["tokens"];
  if (!t.is_array()) throw ApiError(400, "'tokens' must be a list of token ids", "tokens");
  std::vector<int> ids;
  for (size_t i = 0; i < t.size(); ++i) {
    if (!t[i].is_number_integer()) throw ApiError(400, "tokens[" + std::to_string(i) + "] is not an integer", "tokens");
    const int64_t id = t[i].get<int64_t>();
    if (id < 0 || id >= limits_.vocab_size)
      throw ApiError(400, "tokens[" + std::to_string(i) + "] = " + std::to_string(id) + " is not a token id (vocabulary size " +
                              std::to_string(limits_.vocab_size) + ")", "tokens");
    ids.push_back(int(id));
  }
  res.set_content(json_text({{"prompt", tok_.decode(ids)}}), "application/json");
}

}  // namespace llmctl::server
