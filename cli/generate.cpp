// llmctl generate: one prompt (argument or stdin), plain or as a chat, streamed to stdout.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <random>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include <fstream>

#include "engine/batch_generate.h"
#include "engine/core/error.h"
#include "engine/generate_one.h"
#include "engine/runtime.h"
#include "engine/sample/detokenizer.h"
#include "engine/tokenizer/prompt.h"

namespace llmctl::cli {

namespace {
struct GenerateArgs {
  std::string prompt, model, system, dtype, device = "auto", prompts_file;
  int max_num_seqs = 64, max_num_batched_tokens = 512;
  double kv_cache_gb = 1.0, gpu_memory_utilization = 0.9;
  bool chat = false, json = false, enforce_eager = false, deterministic = false;
  int threads = 0;
  SamplingParams sp;
  uint64_t seed = 0;
  bool kv_cache_gb_given = false;
};
}  // namespace

static RuntimeOptions runtime_options(const GenerateArgs& a) {
  RuntimeOptions ro;
  ro.model = a.model;
  ro.threads = a.threads;
  ro.device = a.device;
  ro.enforce_eager = a.enforce_eager;
  ro.deterministic = a.deterministic;
  if (!a.dtype.empty()) ro.dtype = parse_dtype(a.dtype);
  return ro;
}

static int run_prompts(GenerateArgs& a) {
  std::ifstream in(a.prompts_file);
  LLM_REQUIRE(in) << "cannot read " << a.prompts_file;
  Runtime rt = load_runtime(runtime_options(a));
  EngineConfig ec;
  ec.sched.max_num_seqs = a.max_num_seqs;
  ec.sched.max_num_batched_tokens = a.max_num_batched_tokens;
  ec.kv_cache_bytes = a.kv_cache_gb * 1e9;
  if (!a.kv_cache_gb_given) ec.gpu_memory_utilization = a.gpu_memory_utilization;
  Engine engine(*rt.model, *rt.tokenizer, ec);
  BatchGenerateSummary s = run_prompts_jsonl(engine, *rt.tokenizer, in, std::cout, a.sp);
  EngineStats st = engine.stats();
  std::fprintf(stderr,
               "llmctl: %d requests (%d rejected) in %.2f s: %.2f req/s, %.1f generated tok/s, %.1f total tok/s | "
               "%lld steps, %lld preemptions, prefix hit rate %.1f%%, KV waste %.2f%% (mean over steps), peak KV use "
               "%.1f%%, KV blocks in use at the end %d of %d\n",
               s.requests, s.errors, s.seconds, (s.requests - s.errors) / s.seconds, s.generated_tokens / s.seconds,
               (s.prompt_tokens + s.generated_tokens) / s.seconds, (long long)st.steps, (long long)st.preemptions,
               100.0 * st.kv.prefix_hit_rate, 100.0 * st.mean_waste(), 100.0 * st.usage_peak, st.kv.used_blocks,
               st.kv.total_blocks);
  return 0;
}

Runner add_generate(CLI::App& app) {
  auto a = std::make_shared<GenerateArgs>();
  a->sp.temperature = 0.8f;  // llama.cpp's defaults; --temperature 0 is greedy
  a->sp.top_k = 40;
  a->sp.top_p = 0.95f;
  a->sp.min_p = 0.05f;
  auto* s = app.add_subcommand("generate", "generate text from a prompt (argument or stdin), streamed to stdout");
  s->add_option("prompt", a->prompt, "the prompt; read from stdin when absent");
  s->add_option("-m,--model", a->model, "HF directory or .gguf file (default: SmolLM2-135M-Instruct, fetched if absent)");
  s->add_flag("--chat", a->chat, "wrap the prompt as a user message in the model's chat template");
  s->add_option("--system", a->system, "system message (with --chat)");
  s->add_option("-n,--max-tokens", a->sp.max_tokens, "tokens to generate at most")->capture_default_str();
  s->add_option("--temperature", a->sp.temperature, "0 = greedy")->capture_default_str();
  s->add_option("--top-k", a->sp.top_k, "0 = off")->capture_default_str();
  s->add_option("--top-p", a->sp.top_p, "nucleus sampling mass, (0, 1]")->capture_default_str();
  s->add_option("--min-p", a->sp.min_p, "drop tokens below min-p times the top probability")->capture_default_str();
  s->add_option("--repetition-penalty", a->sp.repetition_penalty, "1 = off")->capture_default_str();
  s->add_option("--seed", a->seed, "random seed (same seed, same output); random when absent");
  s->add_option("--stop", a->sp.stop, "stop string (repeatable); never printed");
  s->add_flag("--ignore-eos", a->sp.ignore_eos, "keep generating after the end-of-sequence token");
  s->add_option("--dtype", a->dtype, "weight dtype: f32, f16 or bf16 (default: as stored; GGUF blocks become f32)");
  s->add_option("-t,--threads", a->threads, "CPU threads (default: all cores)");
  s->add_option("--device", a->device, "auto, cpu or cuda (auto: the GPU when one is present)")->capture_default_str();
  s->add_flag("--json", a->json, "print one JSON object with the result instead of streaming text");
  s->add_option("--prompts", a->prompts_file,
                "JSONL file, one request per line ({\"prompt\"} or {\"messages\"} plus sampling fields): "
                "runs them all through the batching engine, one JSON line per result, in input order");
  s->add_option("--max-num-seqs", a->max_num_seqs, "with --prompts: sequences per step")->capture_default_str();
  s->add_option("--max-num-batched-tokens", a->max_num_batched_tokens, "with --prompts: new tokens per step")
      ->capture_default_str();
  s->add_option("--kv-cache-gb", a->kv_cache_gb, "with --prompts: KV cache size (on a GPU: default from "
                "--gpu-memory-utilization)")->capture_default_str();
  s->add_option("--gpu-memory-utilization", a->gpu_memory_utilization,
                "with --prompts on a GPU: fraction of its memory for weights, activations and the KV cache")
      ->capture_default_str();
  s->add_flag("--enforce-eager", a->enforce_eager, "CUDA: run every step eagerly (no CUDA graphs)");
  s->add_flag("--deterministic", a->deterministic,
              "CUDA: batch-invariant kernels, so a request's output does not depend on what shares its batch "
              "(the CPU backend always is)");
  return [a, s]() -> int {
    a->kv_cache_gb_given = s->count("--kv-cache-gb") > 0;
    if (s->count("--seed")) a->sp.seed = a->seed;
    if (!a->sp.seed) a->sp.seed = std::random_device{}();
    a->sp.validate();
    if (!a->prompts_file.empty()) return run_prompts(*a);
    if (a->prompt.empty()) {
      a->prompt.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
      LLM_REQUIRE(utf8_valid(a->prompt)) << "the prompt read from stdin is not valid UTF-8";
    }
    LLM_REQUIRE(!a->prompt.empty()) << "the prompt is empty (pass it as an argument or on stdin)";
    LLM_REQUIRE(utf8_valid(a->prompt)) << "the prompt is not valid UTF-8";

    Runtime rt = load_runtime(runtime_options(*a));
    std::vector<int> ids;
    if (a->chat) {
      nlohmann::json messages = nlohmann::json::array();
      if (!a->system.empty()) messages.push_back({{"role", "system"}, {"content", a->system}});
      messages.push_back({{"role", "user"}, {"content", a->prompt}});
      ids = encode_chat(*rt.tokenizer, messages);
    } else {
      ids = encode_prompt(*rt.tokenizer, a->prompt);
    }
    auto on_text = [&](std::string_view piece) {
      if (a->json) return;
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    };
    GenerateOneResult g = generate_one(*rt.model, *rt.tokenizer, ids, a->sp, on_text);
    const SequenceOutput& r = g.output;
    const size_t n_out = r.token_ids.size();
    const double pp = g.prefill_seconds > 0 ? g.prompt_ids.size() / g.prefill_seconds : 0;
    // The first token comes with the prefill; decode speed counts the ones after it.
    const double tg = g.decode_seconds > 0 && n_out > 1 ? (n_out - 1) / g.decode_seconds : 0;
    if (a->json) {
      nlohmann::json j = {{"text", r.text},
                          {"finish_reason", r.finish_reason},
                          {"prompt_tokens", g.prompt_ids.size()},
                          {"completion_tokens", n_out},
                          {"token_ids", r.token_ids},
                          {"seed", *a->sp.seed},
                          {"load_seconds", rt.load_seconds},
                          {"prefill_tokens_per_second", pp},
                          {"decode_tokens_per_second", tg}};
      std::cout << j.dump() << "\n";
    } else {
      std::cout << "\n";
    }
    std::fprintf(stderr,
                 "llmctl: %s | %s | load %.2f s | prompt %zu tokens, %.1f tok/s | generated %zu tokens, %.1f tok/s | "
                 "finish %s | seed %llu\n",
                 rt.model_path.c_str(), rt.backend->name().c_str(), rt.load_seconds, g.prompt_ids.size(), pp, n_out,
                 tg, r.finish_reason.c_str(), (unsigned long long)*a->sp.seed);
    return 0;
  };
}

}  // namespace llmctl::cli
