// llmctl serve: flags -> a loaded model and ServerConfig -> run_server.
#include <cstdlib>
#include <filesystem>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "engine/core/error.h"
#include "engine/runtime.h"
#include "server/serve.h"

namespace llmctl::cli {

namespace {
struct ServeArgs {
  EngineFlags engine;
  std::string model_arg;  // `llmctl serve MODEL`, vLLM's spelling of --model
  server::ServerConfig server;
};
}  // namespace

Runner add_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  auto* s = app.add_subcommand("serve", "OpenAI- and TGI-compatible HTTP server with SSE streaming");
  s->add_option("MODEL", a->model_arg, "the model, as vLLM's `vllm serve MODEL` (or -m/--model)");
  s->add_option("--host", a->server.host, "address to bind (loopback unless told otherwise)")->capture_default_str();
  s->add_option("--port", a->server.port, "port (0: any free port, printed at start)")->capture_default_str();
  s->add_option("--api-key", a->server.api_key, "require 'Authorization: Bearer KEY' on every route but /health "
                "(default: env LLMCTL_API_KEY)");
  s->add_option("--max-concurrent-requests", a->server.max_concurrent_requests,
                "generation requests in flight at most; beyond it: 429 with Retry-After")->capture_default_str();
  s->add_option("--request-timeout", a->server.request_timeout_s, "seconds a generation may run before it is aborted "
                "(0: no limit)")->capture_default_str();
  s->add_option("--served-model-name", a->server.served_model_name, "model name in the API (default: the model's "
                "directory or file name)");
  s->add_option("--max-body-bytes", a->server.max_body_bytes, "largest request body accepted (413 beyond)")
      ->capture_default_str();
  s->add_option("--max-n", a->server.max_n, "largest n / best_of accepted")->capture_default_str();
  s->add_option("--reasoning-parser", a->server.reasoning_parser,
                "chat: <think> blocks as reasoning_content: auto (when the chat template writes </think>), think "
                "(always; also deepseek_r1, qwen3), none")
      ->capture_default_str()
      ->transform(CLI::Transformer(std::map<std::string, std::string>{{"deepseek_r1", "think"}, {"qwen3", "think"}}))
      ->check(CLI::IsMember({"auto", "think", "none"}));
  s->add_option("--tool-call-parser", a->server.tool_call_parser,
                "chat with tools: how the model writes calls: auto (from the chat template), hermes (also qwen2.5, "
                "qwen3), llama3_json, mistral, mistral_v3, qwen3_coder")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "hermes", "qwen2.5", "qwen3", "llama3_json", "llama3", "mistral", "mistral_v3",
                             "qwen3_coder"}));
  s->add_option("--header-timeout", a->server.header_timeout_s, "seconds a request's headers may take to arrive "
                "(408 beyond)")->capture_default_str();
  add_runtime_flags(s, a->engine);
  add_engine_flags(s, a->engine);
  return [a, s]() -> int {
    if (!a->model_arg.empty()) {
      LLM_REQUIRE(!s->count("--model")) << "the model is given twice (MODEL and --model): give one";
      a->engine.model = a->model_arg;
    }
    if (a->server.api_key.empty())
      if (const char* k = std::getenv("LLMCTL_API_KEY")) a->server.api_key = k;
    LLM_REQUIRE(a->server.max_concurrent_requests >= 1) << "--max-concurrent-requests must be at least 1";
    LLM_REQUIRE(a->server.request_timeout_s >= 0) << "--request-timeout must not be negative";
    LLM_REQUIRE(a->server.header_timeout_s > 0) << "--header-timeout must be positive";
    LLM_REQUIRE(a->server.port >= 0 && a->server.port < 65536) << "--port must be in [0, 65535]";
    server::block_shutdown_signals();  // before any thread starts
    Runtime rt = load_engine_runtime(a->engine);
    if (!s->count("--served-model-name")) {
      std::filesystem::path p(rt.model_path);
      if (p.filename() == "hf") p = p.parent_path();  // $LLMCTL_HOME/models/NAME/hf
      a->server.served_model_name = p.extension() == ".gguf" ? p.stem().string() : p.filename().string();
      // A Hugging Face cache reference (ORG/NAME) is served under that name, as vLLM does.
      const std::string& m = a->engine.model;
      if (!m.empty() && !std::filesystem::exists(m)) a->server.served_model_name = m;
    }
    a->server.device = rt.backend->name();
    a->server.model_dtype = a->engine.dtype.empty() ? "as stored" : a->engine.dtype;
    EngineConfig ec = engine_config(a->engine, s);
    return server::run_server(*rt.executor, *rt.tokenizer, ec, a->server);
  };
}

}  // namespace llmctl::cli
