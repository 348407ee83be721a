// The flags every engine-running subcommand (generate, serve, bench) shares: which model, where and
// how it runs (RuntimeOptions) and how the engine batches and sizes its KV cache (EngineConfig).
#pragma once
#include <string>

#include <CLI/CLI.hpp>

#include "engine/engine.h"
#include "engine/core/thread_pool.h"
#include "engine/runtime.h"
#include "engine/sample/sampling_params.h"

namespace llmctl::cli {

struct EngineFlags {
  std::string cpu_isa = "auto", cpu_qweight_layout = "auto", cpu_weight_prefetch = "auto";
  std::string cpu_codebook_prefill = "auto";
  std::string model, dtype, device = "auto", kv_cache_dtype = "auto", act_quant = "int8",
              quantized_weights = "auto";
  int threads = 0;
  int max_model_len = 0;   // -c/--ctx-size/--max-model-len; 0 = the model's
  int gpu_layers = -1;     // -ngl/--n-gpu-layers (llama.cpp's); -1 = not given
  int tensor_parallel = 1, pipeline_parallel = 1;
  int pp_micro_batches = 0, pp_steps_in_flight = 0;  // -pp, for measurements: 0 = the engine's choice
  bool comm_stats = false, nccl_single_rank = false;   // for measurements
  bool simulate_threads = false;  // bench latency --simulate-threads (RuntimeOptions::simulate_threads)
  bool enforce_eager = false, deterministic = false, kv_fp8_exact_open_block = true;
  int max_num_seqs = 64, max_num_batched_tokens = 512;
  double kv_cache_gb = 1.0, gpu_memory_utilization = 0.9;
  int speculative_ngram = 0, ngram_min = 2, ngram_max = 4;  // speculative decoding: drafts per step, n-gram sizes
  int jump_forward_tokens = 16;  // structured output: tokens a grammar forces, taken without a draw (0 = off)
};

// Registers the runtime flags (-m/--model, --dtype, --device, -t/--threads, -c/--ctx-size/--max-model-len,
// -ngl/--n-gpu-layers, -tp/--tensor-parallel-size, -pp/--pipeline-parallel-size, --enforce-eager,
// --deterministic, --kv-cache-dtype, --act-quant) on s.
void add_runtime_flags(CLI::App* s, EngineFlags& f);
// Registers the KV cache flags (--kv-cache-gb, --gpu-memory-utilization); `scope` prefixes their
// help (e.g. "with --prompts: ").
void add_kv_cache_flags(CLI::App* s, EngineFlags& f, const std::string& scope = "");
// Speculative decoding by prompt lookup: --speculative-ngram K (drafts per step, 0 = off),
// --speculative-ngram-min / --speculative-ngram-max (n-gram sizes tried, longest first).
void add_speculative_flags(CLI::App* s, EngineFlags& f);
// The batching flags (--max-num-seqs, --max-num-batched-tokens), the KV cache flags (`scope`
// prefixes their help) and the speculative decoding flags.
void add_engine_flags(CLI::App* s, EngineFlags& f, const std::string& scope = "");

// The sampling flags of generate and chat, with llama.cpp's defaults (temperature 0.8, top-k 40,
// top-p 0.95, min-p 0.05): -n/--max-tokens/--n-predict (`max_tokens` is its default),
// --temperature/--temp, --top-k, --top-p, --min-p, --repetition-penalty, --seed, --ignore-eos.
void add_sampling_flags(CLI::App* s, SamplingParams& sp, uint64_t& seed, int max_tokens, const std::string& tokens_help);
// After parsing: --seed (or a random one) into sp, then validation (throws InputError).
void finish_sampling_flags(const CLI::App* s, SamplingParams& sp, uint64_t seed);

// Without --model, fetches the default model first when it is absent (cli/fetch_model.h).
RuntimeOptions runtime_options(const EngineFlags& f);
// runtime_options, then load_runtime. With -tp N x -pp M > 1 in a process mpirun did not start,
// this process is first replaced by `mpirun -np N*M` of the same command line
// (engine/parallel/launcher.h).
// On ranks > 0 it never returns: they serve rank 0's steps, then the process exits.
Runtime load_engine_runtime(const EngineFlags& f);

// Whether this process reads a prompt from standard input: a single-rank run does; under -tp/-pp
// only rank 0 does (mpirun forwards stdin to rank 0 alone), not the launcher (it leaves stdin to
// mpirun) nor the other ranks (they serve rank 0's steps and never see a prompt).
bool reads_stdin_prompt(const EngineFlags& f);

// main() records the command line, for the relaunch under mpirun.
void set_command_line(int argc, char** argv);
// --kv-cache-gb, when given on s, overrides --gpu-memory-utilization. With --speculative-ngram,
// the engine gets an NgramProposer.
EngineConfig engine_config(const EngineFlags& f, const CLI::App* s);

}  // namespace llmctl::cli
