// llmctl serve: flags -> a loaded model and ServerConfig -> run_server.
#include <cstdlib>
#include <filesystem>

#include "cli/commands.h"
#include "engine/core/error.h"
#include "engine/runtime.h"
#include "engine/server/serve.h"

namespace llmctl::cli {

namespace {
struct ServeArgs {
  std::string model, dtype, device = "auto";
  int threads = 0, max_num_seqs = 64, max_num_batched_tokens = 512, max_model_len = 0;
  double kv_cache_gb = 1.0, gpu_memory_utilization = 0.9;
  bool enforce_eager = false, deterministic = false;
  server::ServerConfig server;
};
}  // namespace

Runner add_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  auto* s = app.add_subcommand("serve", "OpenAI- and TGI-compatible HTTP server with SSE streaming");
  s->add_option("-m,--model", a->model, "HF directory or .gguf file (default: SmolLM2-135M-Instruct, fetched if absent)");
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
  s->add_option("--max-num-seqs", a->max_num_seqs, "sequences per engine step")->capture_default_str();
  s->add_option("--max-num-batched-tokens", a->max_num_batched_tokens, "new tokens per engine step")->capture_default_str();
  s->add_option("--max-model-len", a->max_model_len, "context limit (default: the model's)");
  s->add_option("--kv-cache-gb", a->kv_cache_gb, "KV cache size (on a GPU: default from --gpu-memory-utilization)")
      ->capture_default_str();
  s->add_option("--gpu-memory-utilization", a->gpu_memory_utilization,
                "on a GPU: fraction of its memory for weights, activations and the KV cache")->capture_default_str();
  s->add_option("--dtype", a->dtype, "weight dtype: f32, f16 or bf16 (default: as stored; GGUF blocks become f32)");
  s->add_option("-t,--threads", a->threads, "CPU threads (default: all cores)");
  s->add_option("--device", a->device, "auto, cpu or cuda (auto: the GPU when one is present)")->capture_default_str();
  s->add_flag("--enforce-eager", a->enforce_eager, "CUDA: run every step eagerly (no CUDA graphs)");
  s->add_flag("--deterministic", a->deterministic, "CUDA: batch-invariant kernels");
  return [a, s]() -> int {
    if (a->server.api_key.empty())
      if (const char* k = std::getenv("LLMCTL_API_KEY")) a->server.api_key = k;
    LLM_REQUIRE(a->server.max_concurrent_requests >= 1) << "--max-concurrent-requests must be at least 1";
    LLM_REQUIRE(a->server.request_timeout_s >= 0) << "--request-timeout must not be negative";
    LLM_REQUIRE(a->server.port >= 0 && a->server.port < 65536) << "--port must be in [0, 65535]";
    server::block_shutdown_signals();  // before any thread starts
    RuntimeOptions ro;
    ro.model = a->model;
    ro.threads = a->threads;
    ro.device = a->device;
    ro.enforce_eager = a->enforce_eager;
    ro.deterministic = a->deterministic;
    if (!a->dtype.empty()) ro.dtype = parse_dtype(a->dtype);
    Runtime rt = load_runtime(ro);
    if (!s->count("--served-model-name")) {
      std::filesystem::path p(rt.model_path);
      if (p.filename() == "hf") p = p.parent_path();  // $LLMCTL_HOME/models/NAME/hf
      a->server.served_model_name = p.filename().string();
    }
    a->server.device = rt.backend->name();
    a->server.model_dtype = a->dtype.empty() ? "as stored" : a->dtype;
    EngineConfig ec;
    ec.sched.max_num_seqs = a->max_num_seqs;
    ec.sched.max_num_batched_tokens = a->max_num_batched_tokens;
    ec.kv_cache_bytes = a->kv_cache_gb * 1e9;
    ec.max_context = a->max_model_len;
    if (!s->count("--kv-cache-gb")) ec.gpu_memory_utilization = a->gpu_memory_utilization;
    return server::run_server(*rt.model, *rt.tokenizer, ec, a->server);
  };
}

}  // namespace llmctl::cli
