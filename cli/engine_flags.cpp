#include "cli/engine_flags.h"

#include "cli/fetch_model.h"
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/parallel/launcher.h"
#include "engine/spec/ngram_proposer.h"

namespace llmctl::cli {

void add_runtime_flags(CLI::App* s, EngineFlags& f) {
  s->add_option("-m,--model", f.model,
                "HF directory, .gguf file, or ORG/NAME[:FILE.gguf|:QUANT] from the Hugging Face cache (default: "
                "SmolLM2-135M-Instruct's Q4_1 GGUF, fetched if absent)");
  s->add_option("--dtype", f.dtype,
                "weight dtype: f32, f16 or bf16 (default: as stored; a GGUF's quantized blocks run as they are, and "
                "on the CPU --dtype asks for a dense copy instead)");
  s->add_option("--device", f.device, "auto, cpu or cuda (auto: the GPU when one is present)")->capture_default_str();
  s->add_option("-t,--threads", f.threads,
                "CPU threads (default: one per physical core this process may use; with -tp N, each rank's share)")
      ->check(CLI::Range(0, kMaxThreads));
  s->add_option("-c,--ctx-size,--max-model-len", f.max_model_len,
                "context length in tokens, prompt and output together (default: the model's)")
      ->check(CLI::Range(1, 1 << 24));
  s->add_option("--n-gpu-layers,--gpu-layers", f.gpu_layers,
                "(also -ngl, as llama.cpp) layers on the GPU: llmctl runs all of them there or none, so 0 means the "
                "CPU and any other number the GPU when there is one")
      ->check(CLI::Range(0, 1 << 20));
  s->add_option("--tensor-parallel-size", f.tensor_parallel,
                "(also -tp) split the model over N ranks (Megatron tensor parallelism, CPU ranks over MPI): llmctl starts them "
                "under mpirun on this node; across nodes, run llmctl under mpirun -np N -H ... yourself")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  s->add_option("--pipeline-parallel-size", f.pipeline_parallel,
                "(also -pp) split the layers over M pipeline stages, one rank (or -tp ranks) each, started as for -tp")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  s->add_option("--pp-micro-batches", f.pp_micro_batches,
                "-pp, for measurements: cut each step into this many micro-batches (1: none; default: steps of 64 "
                "tokens a stage or more into one per stage)")
      ->check(CLI::Range(1, 1024));
  s->add_option("--pp-steps-in-flight", f.pp_steps_in_flight,
                "-pp, for measurements: steps in flight at once (1: one at a time; default: one per stage)")
      ->check(CLI::Range(1, 1024));
  s->add_flag("--comm-stats", f.comm_stats,
              "-tp/-pp, for measurements: each rank prints its time in all-reduces and all-gathers, and its memory, "
              "at exit");
  s->add_flag("--nccl-single-rank", f.nccl_single_rank,
              "CUDA without -tp, for measurements: run the step's collectives through NCCL anyway (to compare it "
              "with the plain path)");
  s->add_flag("--enforce-eager", f.enforce_eager, "CUDA: run every step eagerly (no CUDA graphs)");
  s->add_flag("--deterministic", f.deterministic,
              "CUDA: batch-invariant kernels, so a request's output does not depend on what shares its batch "
              "(the CPU backend always is)");
  s->add_option("--kv-cache-dtype", f.kv_cache_dtype,
                "KV cache element type: auto (the activation dtype), int8 (per-token, per-head scales and zero "
                "points) or fp8 (e4m3, per-head k_scale/v_scale from the checkpoint, else 1.0); CPU and CUDA")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "int8", "fp8", "fp8_e4m3"}));
  s->add_option("--kv-fp8-exact-open-block", f.kv_fp8_exact_open_block,
                "fp8 KV cache: keep each sequence's open block exact beside it where the backend can (true; false "
                "only to measure what it buys)")
      ->capture_default_str();
  s->add_option("--act-quant", f.act_quant,
                "CPU, quantized (int4/int8-group) weights: activations quantized to int8 per block of 32 (int8, as "
                "llama.cpp; faster) or kept f32 (none; exact up to summation order)")
      ->capture_default_str()
      ->check(CLI::IsMember({"int8", "none"}));
  s->add_option("--cpu-isa", f.cpu_isa,
                "CPU kernels, for measurements and A/B runs: auto (the best this CPU has), amx (AVX-512 VNNI "
                "with AMX tiles for prompts), or step down to avx512-vnni, avx-vnni (AVX2 with VEX vpdpbusd), "
                "avx2 or scalar")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "amx", "avx512-vnni", "avx-vnni", "avx2", "scalar"}));
  s->add_option("--cpu-qweight-layout", f.cpu_qweight_layout,
                "CPU quantized weights, for measurements: auto (16-row lanes where the SIMD kernels take them) or "
                "rows (the row-major layout)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "rows"}));
  s->add_option("--cpu-weight-prefetch", f.cpu_weight_prefetch,
                "CPU quantized weights, AVX2 decode, for measurements: which codes are prefetched ahead of the "
                "stream: auto (all on AMD Zen 1 / Zen 2, where it measured faster; else wide), all, or wide "
                "(wide 8-bit codes only). The output is the same either way")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "all", "wide"}));
  s->add_option("--cpu-codebook-prefill", f.cpu_codebook_prefill,
                "CPU quantized weights, AVX2 prompts without VNNI, for measurements: how IQ2 / IQ3_XXS grid values "
                "are multiplied: auto (magnitude on AMD CPUs, where it measured faster; else narrow), magnitude "
                "(|value| against sign-flipped activations) or narrow (value - the least). The output is the same "
                "either way")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "magnitude", "narrow"}));
  s->add_option("--quantized-weights", f.quantized_weights,
                "quantized linears (int4/int8 groups, GGUF blocks): keep (run by the quantized kernels: least "
                "memory), dequantize (to the compute dtype at load) or auto (keep on the CPU; on CUDA dequantize "
                "when the dense copy fits in half the GPU's free memory, as its dense GEMMs are faster)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "keep", "dequantize"}));
}

void add_sampling_flags(CLI::App* s, SamplingParams& sp, uint64_t& seed, int max_tokens, const std::string& tokens_help) {
  sp.temperature = 0.8f;  // llama.cpp's defaults; --temperature 0 is greedy
  sp.top_k = 40;
  sp.top_p = 0.95f;
  sp.min_p = 0.05f;
  sp.max_tokens = max_tokens;
  s->add_option("-n,--max-tokens,--n-predict", sp.max_tokens, tokens_help)->capture_default_str();
  s->add_option("--temperature,--temp", sp.temperature, "0 = greedy")->capture_default_str();
  s->add_option("--top-k", sp.top_k, "0 = off")->capture_default_str();
  s->add_option("--top-p", sp.top_p, "nucleus sampling mass, (0, 1]")->capture_default_str();
  s->add_option("--min-p", sp.min_p, "drop tokens below min-p times the top probability")->capture_default_str();
  s->add_option("--repetition-penalty", sp.repetition_penalty, "1 = off")->capture_default_str();
  s->add_option("--seed", seed, "random seed (same seed, same output); random when absent");
  s->add_flag("--ignore-eos", sp.ignore_eos, "keep generating after the end-of-sequence token");
}

void finish_sampling_flags(const CLI::App* s, SamplingParams& sp, uint64_t seed) {
  if (s->count("--seed")) sp.seed = seed;
  if (!sp.seed) sp.seed = std::random_device{}();
  sp.validate();
}

void add_engine_flags(CLI::App* s, EngineFlags& f, const std::string& scope) {
  s->add_option("--max-num-seqs", f.max_num_seqs, scope + "sequences per engine step")->capture_default_str();
  s->add_option("--max-num-batched-tokens", f.max_num_batched_tokens, scope + "new tokens per engine step")
      ->capture_default_str();
  add_kv_cache_flags(s, f, scope);
  add_speculative_flags(s, f);
}

void add_speculative_flags(CLI::App* s, EngineFlags& f) {
  s->add_option("--speculative-ngram", f.speculative_ngram,
                "speculative decoding by prompt lookup: up to K draft tokens a step, copied from where the last "
                "n tokens occurred before; outputs unchanged (on CUDA: exactly so with --deterministic). 0 = off")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  s->add_option("--speculative-ngram-min", f.ngram_min, "with --speculative-ngram: shortest n-gram matched")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  s->add_option("--speculative-ngram-max", f.ngram_max, "with --speculative-ngram: longest n-gram matched (tried first)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  s->add_option("--jump-forward-tokens", f.jump_forward_tokens,
                "structured output: where the grammar allows one next token only, up to N such tokens are taken "
                "without a draw and computed in one step (outputs unchanged). 0 = off")
      ->capture_default_str()
      ->check(CLI::Range(0, 256));
}

void add_kv_cache_flags(CLI::App* s, EngineFlags& f, const std::string& scope) {
  s->add_option("--kv-cache-gb", f.kv_cache_gb,
                scope + "KV cache size (on a GPU: default from --gpu-memory-utilization)")
      ->capture_default_str();
  s->add_option("--gpu-memory-utilization", f.gpu_memory_utilization,
                scope + "on a GPU: fraction of its memory for weights, activations and the KV cache")
      ->capture_default_str();
}

RuntimeOptions runtime_options(const EngineFlags& f) {
  RuntimeOptions ro;
  ro.model = f.model;
  ro.threads = f.threads;
  ro.device = f.device;
  if (f.gpu_layers >= 0) ro.gpu_layers = f.gpu_layers;
  ro.enforce_eager = f.enforce_eager;
  ro.deterministic = f.deterministic;
  if (!f.dtype.empty()) ro.dtype = parse_dtype(f.dtype);
  const auto kv = parse_kv_cache_dtype(f.kv_cache_dtype);
  LLM_REQUIRE(kv) << "--kv-cache-dtype " << f.kv_cache_dtype << ": expected auto, int8 or fp8";
  ro.kv_cache_dtype = *kv;
  ro.kv_fp8_exact_open_block = f.kv_fp8_exact_open_block;
  const auto aq = parse_act_quant(f.act_quant);
  LLM_REQUIRE(aq) << "--act-quant " << f.act_quant << ": expected int8 or none";
  ro.act_quant = *aq;
  ro.cpu_kernels = CpuKernelOptions{f.cpu_isa, f.cpu_qweight_layout == "rows", f.cpu_weight_prefetch,
                                    f.cpu_codebook_prefill};
  ro.simulate_threads = f.simulate_threads;
  const auto qw = parse_quantized_weights(f.quantized_weights);
  LLM_REQUIRE(qw) << "--quantized-weights " << f.quantized_weights << ": expected auto, keep or dequantize";
  ro.quantized_weights = *qw;
  ro.tensor_parallel = f.tensor_parallel;
  ro.pipeline_parallel = f.pipeline_parallel;
  ro.pp_micro_batches = f.pp_micro_batches;
  ro.pp_steps_in_flight = f.pp_steps_in_flight;
  ro.comm_stats = f.comm_stats;
  ro.nccl_single_rank = f.nccl_single_rank;
  fetch_default_model_if_absent(ro.model);  // load_runtime then finds it (the engine does not fetch)
  return ro;
}

namespace {
std::vector<std::string> g_command_line;
}  // namespace

void set_command_line(int argc, char** argv) { g_command_line.assign(argv, argv + argc); }

bool reads_stdin_prompt(const EngineFlags& f) {
  if (f.tensor_parallel * f.pipeline_parallel <= 1) return true;
  return launched_by_mpi() && launcher_rank() == 0;
}

Runtime load_engine_runtime(const EngineFlags& f) {
  const RuntimeOptions ro = runtime_options(f);  // the default model is fetched once, before the ranks start
  const int ranks = ro.tensor_parallel * ro.pipeline_parallel;
  if (ranks > 1 && !launched_by_mpi()) {
    check_parallel_sizes(ro);  // the model's config: sizes that do not divide, refused before any rank starts
    std::exit(run_under_mpirun(ranks, g_command_line));  // the ranks' status; they reported
  }
  Runtime rt = load_runtime(ro);
  if (rt.is_worker_rank()) {
    serve_ranks(rt);
    std::exit(0);  // rank 0 reports; this rank has nothing to print
  }
  return rt;
}

EngineConfig engine_config(const EngineFlags& f, const CLI::App* s) {
  EngineConfig ec;
  ec.sched.max_num_seqs = f.max_num_seqs;
  ec.sched.max_num_batched_tokens = f.max_num_batched_tokens;
  ec.kv_cache_bytes = f.kv_cache_gb * 1e9;
  ec.max_context = f.max_model_len;
  if (!s->count("--kv-cache-gb")) ec.gpu_memory_utilization = f.gpu_memory_utilization;
  ec.jump_forward_tokens = f.jump_forward_tokens;
  if (f.speculative_ngram > 0) {
    ec.proposer = std::make_shared<NgramProposer>(f.ngram_min, f.ngram_max);
    ec.num_speculative_tokens = f.speculative_ngram;
  }
  return ec;
}

}  // namespace llmctl::cli
