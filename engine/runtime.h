// Runtime: a model ready to run — tokenizer, backend and weights — loaded from a path.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "engine/backend/backend.h"
#include "engine/model/checkpoint.h"
#include "engine/executor/executor.h"
#include "engine/model/model.h"
#include "engine/parallel/comm.h"
#include "engine/tokenizer/tokenizer.h"

namespace llmctl {

// What becomes of a checkpoint's quantized linears (int4 / int8 groups, GGUF blocks) on a backend
// that runs them. auto: kept quantized on the CPU; on CUDA dequantized to the compute dtype when
// the dense copy fits in half the device's free memory (the GPU's dense GEMMs are faster than its
// W4A16 kernels past a few sequences: bench/results/h200-gpu-check/), kept quantized when not.
enum class QuantizedWeights { Auto, Keep, Dequantize };
std::optional<QuantizedWeights> parse_quantized_weights(const std::string& s);  // auto | keep | dequantize

struct RuntimeOptions {
  std::string model;               // path; empty = the default model
  // Weight dtype (nullopt: as stored). On the CPU a GGUF's quantized blocks run as they are unless
  // a dtype is given: then the model runs a dense copy in it.
  std::optional<DType> dtype;
  int threads = 0;                 // CPU threads, 0 = all cores
  std::string device = "auto";     // auto | cpu | cuda (auto: the GPU when one is present)
  // llama.cpp's -ngl: 0 keeps an auto device on the CPU; more puts every layer on the GPU when
  // there is one (a note says so when it is fewer than the model's, or when there is no GPU).
  std::optional<int> gpu_layers;
  bool enforce_eager = false;      // CUDA: no graphs
  bool deterministic = false;      // CUDA: batch-invariant kernels (the CPU backend always is)
  KvCacheDtype kv_cache_dtype = KvCacheDtype::Auto;  // --kv-cache-dtype (engine/kv/kv_cache_spec.h)
  bool kv_fp8_exact_open_block = true;               // --kv-fp8-exact-open-block
  ActQuantMode act_quant = ActQuantMode::Int8;       // CPU quantized linears (engine/backend/act_quant.h)
  CpuKernelOptions cpu_kernels;                      // --cpu-isa, --cpu-qweight-layout, ... (make_cpu_backend)
  bool simulate_threads = false;  // bench latency --simulate-threads: the CPU's threads modelled (make_cpu_backend)
  QuantizedWeights quantized_weights = QuantizedWeights::Auto;  // --quantized-weights
  // -tp: ranks the model is split over (Megatron tensor parallelism), one process each, started by
  // mpirun (engine/parallel/launcher.h); 1 = this process alone.
  int tensor_parallel = 1;
  // -pp: pipeline stages (the layers split in order); tensor_parallel x pipeline_parallel ranks.
  int pipeline_parallel = 1;
  // Pipeline-parallel switches for measurements (PipelineOptions): micro-batches a step is cut into,
  // steps in flight; 0: the runner's and executor's own choice.
  int pp_micro_batches = 0, pp_steps_in_flight = 0;
  bool comm_stats = false;        // --comm-stats: each MPI rank prints its collectives' time at exit
  bool nccl_single_rank = false;  // --nccl-single-rank: CUDA, one rank: the collectives through NCCL anyway
};

struct Runtime {
  std::string model_path;
  ModelConfig config;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Comm> comm;          // several ranks: all of them (else null); outlives the model
  std::unique_ptr<Comm> tp_comm;       // several ranks: this rank's tensor-parallel group
  std::unique_ptr<Backend> backend;    // declared first: destroyed after what runs on it
  std::unique_ptr<Comm> device_comm;   // GPU ranks: the tensor-parallel group over NCCL, on the backend's stream
  std::unique_ptr<Model> model;        // from the architecture registry
  std::unique_ptr<Executor> executor;  // what Engine, Scorer, serve and bench run the model through
  double load_seconds = 0;
  // The checkpoint's quantized linears were kept quantized for the backend (it runs Int4Group and
  // Int8Group); false for a dense checkpoint, or when they were dequantized at load.
  bool quantized_linears = false;
  // What the linear weights are and how they run, for stats lines and reports: "Q4_1 GGUF, run
  // quantized (int8 activations)", "Q4_1 GGUF, dequantized to f32", "f32", ...
  std::string weights;
  int threads = 0;  // CPU threads of this rank's backend (0 on a GPU)
  // Several ranks: this process's rank in the run. Rank 0 runs everything above the executor (whose
  // calls reach every rank); the others only serve_ranks().
  int rank = 0;
  bool is_worker_rank() const { return rank != 0; }
};

// Loads the model (several ranks: this rank's share; the process must have been started by mpirun
// with -np tensor_parallel x pipeline_parallel ranks).
Runtime load_runtime(const RuntimeOptions& opts);

// Refuses a -tp / -pp the model cannot be split over (its query heads, KV heads, MLP width,
// vocabulary or layers do not divide), reading only its config: what a launcher checks before it
// starts any rank. The same InputError, with the numbers, as each rank's load would throw.
void check_parallel_sizes(const RuntimeOptions& opts);

// Ranks > 0 of a multi-rank run: executes rank 0's steps until rank 0's executor is gone.
void serve_ranks(Runtime& rt);

}  // namespace llmctl
