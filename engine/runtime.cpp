#include "engine/runtime.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <iostream>
#include <string>

#include "engine/core/cpu_topology.h"
#include "engine/core/error.h"
#include "engine/core/mapped_file.h"
#include "engine/executor/local_executor.h"
#include "engine/executor/multi_rank_executor.h"
#include "engine/model/default_model.h"
#include "engine/model/describe_weights.h"
#include "engine/model/registry.h"
#include "engine/model/weights/megatron_split.h"
#include "engine/parallel/launcher.h"
#include "engine/parallel/mpi_comm.h"
#include "engine/parallel/nccl_comm.h"
#ifdef LLMCTL_HAVE_CUDA
#include "engine/backend/cuda/cuda_backend.h"
#endif

namespace llmctl {

namespace {

// The communicator of every rank of a -tp x -pp run, checked against the ranks mpirun started.
std::unique_ptr<Comm> make_run_comm(const RuntimeOptions& opts) {
  LLM_REQUIRE(opts.tensor_parallel >= 1) << "--tensor-parallel-size must be at least 1, got " << opts.tensor_parallel;
  LLM_REQUIRE(opts.pipeline_parallel >= 1) << "--pipeline-parallel-size must be at least 1, got " << opts.pipeline_parallel;
  const int ranks = opts.tensor_parallel * opts.pipeline_parallel;
  // mpirun -np 2 of a one-rank command would start two independent copies (two servers on one port)
  LLM_REQUIRE(ranks > 1 || launcher_world_size() == 1)
      << "mpirun started " << launcher_world_size() << " ranks but -tp " << opts.tensor_parallel << " x -pp "
      << opts.pipeline_parallel << " needs 1 (give -tp / -pp, or run it without mpirun)";
  if (ranks == 1) return nullptr;
  LLM_REQUIRE(launched_by_mpi()) << ranks << " ranks (-tp " << opts.tensor_parallel << " x -pp " << opts.pipeline_parallel
                                 << "): this process was not started by mpirun (llmctl starts its own ranks on one node; "
                                    "across nodes run it under mpirun -np "
                                 << ranks << ")";
  std::unique_ptr<Comm> comm = make_mpi_comm(opts.comm_stats);
  LLM_REQUIRE(comm->world() == ranks) << "mpirun started " << comm->world() << " ranks but -tp "
                                      << opts.tensor_parallel << " x -pp " << opts.pipeline_parallel << " needs " << ranks;
  return comm;
}

// Ranks > 0 read the same files as rank 0: while they load, their notes (written to stderr) would
// only repeat rank 0's. Errors are exceptions, reported by the caller, and still reach the user.
class QuietNotes {
 public:
  explicit QuietNotes(bool quiet) : old_(quiet ? std::cerr.rdbuf(&null_) : nullptr) {}
  ~QuietNotes() {
    if (old_) std::cerr.rdbuf(old_);
  }

 private:
  struct NullBuf : std::streambuf {
    int overflow(int c) override { return c; }
  } null_;
  std::streambuf* old_;
};

}  // namespace

// --device after llama.cpp's -ngl: 0 layers on the GPU is the CPU; any other count is all of them
// on the GPU where there is one (llmctl does not split layers between the two).
static std::string device_for_gpu_layers(const RuntimeOptions& opts) {
  if (!opts.gpu_layers) return opts.device;
  if (*opts.gpu_layers == 0) return opts.device == "auto" ? "cpu" : opts.device;
  bool gpu = false;
#ifdef LLMCTL_HAVE_CUDA
  gpu = cuda_device_available();
#endif
  if (!gpu || opts.device == "cpu")
    std::cerr << "llmctl: note: --n-gpu-layers " << *opts.gpu_layers << " has no effect: "
              << (opts.device == "cpu" ? "--device cpu was asked for"
                                       : "no GPU here (or llmctl was built without CUDA); running on the CPU")
              << "\n";
  else
    std::cerr << "llmctl: note: --n-gpu-layers: llmctl runs every layer on the GPU\n";
  return opts.device;
}

std::optional<QuantizedWeights> parse_quantized_weights(const std::string& s) {
  if (s == "auto") return QuantizedWeights::Auto;
  if (s == "keep") return QuantizedWeights::Keep;
  if (s == "dequantize") return QuantizedWeights::Dequantize;
  return std::nullopt;
}

// --quantized-weights auto on a GPU: whether a dense copy of the checkpoint's weights fits in half
// the device's free memory. Estimated from the files' size before anything is read: a quantized
// checkpoint stores about 4.5 bits a weight (Q4 blocks, int4 groups with their scales), so its
// dense 16-bit copy is at most 16 / 4.5 times its size (an 8-bit one is overestimated: it stays
// quantized sooner). A dense checkpoint has no quantized linears, and the answer does not matter.
static bool dense_copy_fits(const std::string& path, Backend& backend) {
  namespace fs = std::filesystem;
  uintmax_t bytes = 0;
  if (fs::is_directory(path)) {
    for (const fs::directory_entry& e : fs::directory_iterator(path))
      if (e.is_regular_file() && e.path().extension() == ".safetensors") bytes += e.file_size();
  } else {
    bytes = fs::file_size(path);
  }
  const std::optional<size_t> free_bytes = backend.kv_cache_budget(1.0, 0);  // all the device has left
  return free_bytes && double(bytes) * 16.0 / 4.5 <= 0.5 * double(*free_bytes);
}

// Loads this rank's part into rt, whose communicator is set (several ranks) or null.
static void load_rank(Runtime& rt, const RuntimeOptions& opts) {
  auto t0 = std::chrono::steady_clock::now();
  rt.rank = rt.comm ? rt.comm->rank() : 0;
  const int ranks = rt.comm ? rt.comm->world() : 1;
  // Rank r is tensor-parallel rank r % tp of pipeline stage r / tp; each stage's ranks form a group.
  const int world = opts.tensor_parallel, stage = rt.rank / world;
  if (ranks > 1) rt.tp_comm = rt.comm->split(stage, rt.rank % world);
  QuietNotes quiet(rt.rank > 0);
  rt.model_path = resolve_model(opts.model);
  LLM_REQUIRE(opts.device == "auto" || opts.device == "cpu" || opts.device == "cuda")
      << "unknown device '" << opts.device << "' (expected auto, cpu or cuda)";
  const std::string device = device_for_gpu_layers(opts);
  std::optional<DType> weight_dtype = opts.dtype;
#ifdef LLMCTL_HAVE_CUDA
  // Several ranks take the GPU only when asked (--device cuda): CPU ranks are the tested default.
  if (device == "cuda" || (device == "auto" && ranks == 1 && cuda_device_available())) {
    LLM_REQUIRE(cuda_device_available()) << "--device cuda: no CUDA device is available";
    // Tensor-parallel groups talk through NCCL; pipeline stages hand their activations over in host
    // memory through the MPI communicator, so -pp alone needs no NCCL.
    LLM_REQUIRE(world == 1 || nccl_available()) << "--tensor-parallel-size " << world << " with --device cuda needs "
                                                << "NCCL, and this llmctl was built without it; run the ranks on "
                                                << "the CPU (--device cpu)";
    // Activations in bf16 unless f16 weights were asked for; weights in the compute dtype.
    const DType compute = opts.dtype == DType::F16 ? DType::F16 : DType::BF16;
    CudaOptions co;
    co.graphs = !opts.enforce_eager;
    co.deterministic = opts.deterministic;
    co.autotune_dir = llmctl_home();  // measured GEMM algorithms, reused by later runs
    // One GPU per rank on a node: the rank's place among the node's ranks picks it. With more ranks
    // than GPUs, ranks share devices round-robin (NCCL refuses two ranks of one group on one GPU).
    const int devices = cuda_device_count(), device = launcher_local_rank() % devices;
    co.ranks_per_device = (launcher_local_size() - 1 - device) / devices + 1;
    rt.backend = make_cuda_backend(compute, device, co);
    weight_dtype = compute;
    // The step's collectives on the GPU (NCCL, on the backend's stream); at world 1 only when asked,
    // to compare the NCCL path with the plain one (scripts/gpu-check.sh).
    if (world > 1 || opts.nccl_single_rank) rt.device_comm = make_nccl_comm(rt.tp_comm.get(), *rt.backend);
  }
#else
  LLM_REQUIRE(device != "cuda") << "--device cuda: this llmctl was built without CUDA";
#endif
  // Ranks share the node's cores unless --threads says otherwise.
  const int threads =
      opts.threads > 0 || ranks == 1 ? opts.threads : std::max(1, default_cpu_threads() / ranks);
  if (!rt.backend) {
    rt.backend = make_cpu_backend(threads, opts.act_quant, opts.cpu_kernels, opts.simulate_threads);
    rt.threads = threads > 0 ? threads : default_cpu_threads();
  }
  // The backend is chosen first: quantized linears stay quantized only for one that runs them;
  // otherwise the checkpoint dequantizes them as it always has.
  LoadOptions lo;
  lo.dtype = opts.dtype;
  lo.keep_quantized = rt.backend->caps().supports(WeightFormat::Int4Group) && rt.backend->caps().supports(WeightFormat::Int8Group);
  // --dtype on the CPU with a GGUF asks for a dense copy (on CUDA it picks the compute dtype).
  const bool cpu = rt.backend->device() == Device::CPU;
  if (cpu && opts.dtype && std::filesystem::path(rt.model_path).extension() == ".gguf") lo.keep_quantized = false;
  if (opts.quantized_weights == QuantizedWeights::Dequantize) lo.keep_quantized = false;
  if (opts.quantized_weights == QuantizedWeights::Auto && !cpu && lo.keep_quantized)
    lo.keep_quantized = !dense_copy_fits(rt.model_path, *rt.backend);
  lo.quantized_embedding = lo.keep_quantized && rt.backend->caps().quantized_embed;
  Checkpoint ckpt = load_checkpoint(rt.model_path, lo);
  ckpt.release_after_upload = true;  // one model is built from it: quantized weights freed as they upload
  rt.config = ckpt.config;
  // The tokenizer is built on its own thread while the weights load (a large vocabulary takes tens
  // of milliseconds); it reads only the checkpoint's metadata, which the weights' loading leaves as it is.
  std::future<std::unique_ptr<Tokenizer>> tokenizer =
      std::async(std::launch::async, [&ckpt] { return load_tokenizer(ckpt); });
  rt.quantized_linears = !ckpt.quantized.empty();
  rt.weights = describe_weights(ckpt, weight_dtype,
                                cpu && rt.quantized_linears ? act_quant_name(opts.act_quant) : nullptr);
  ParallelContext par;
  // A tensor-parallel group of one (pipeline stages alone) has nothing to reduce: no communicator, so
  // device tensors never reach the host-only MPI one. NCCL at world 1 is kept where it was asked for.
  par.rank = rt.rank % world, par.world = world;
  par.comm = rt.device_comm ? rt.device_comm.get() : world > 1 ? rt.tp_comm.get() : nullptr;
  par.stage = stage, par.stages = opts.pipeline_parallel, par.pp_comm = rt.comm.get();
  try {
    rt.model = make_model(ckpt, *rt.backend, weight_dtype, par);
  } catch (...) {
    (void)tokenizer.get();  // a tokenizer's error, reported before the weights' when they loaded in turn
    throw;
  }
  rt.tokenizer = tokenizer.get();
  release_mapped_pages_again();  // pages of released weights that later reads mapped back in
  // Each refuses a KV dtype the backend lacks.
  const KvCacheOptions kv(opts.kv_cache_dtype, opts.kv_fp8_exact_open_block);
  const PipelineOptions pp{opts.pp_micro_batches, opts.pp_steps_in_flight};
  if (rt.rank == 0 && ranks > 1)
    rt.executor = make_multi_rank_executor(*rt.model, kv, *rt.comm, pp);
  else
    rt.executor = std::make_unique<LocalExecutor>(*rt.model, kv, pp);
  if (opts.kv_cache_dtype == KvCacheDtype::Fp8 && rt.model->kv_scales().empty() && rt.rank == 0)
    std::cerr << "llmctl: warning: --kv-cache-dtype fp8 without k_scale/v_scale in the checkpoint: using scale 1.0 "
                 "for every layer (accuracy may suffer; calibrate them with llmctl quantize --kv-cache fp8)\n";
  rt.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Runtime load_runtime(const RuntimeOptions& opts) {
  Runtime rt;
  rt.comm = make_run_comm(opts);
  try {
    load_rank(rt, opts);
  } catch (const std::exception& e) {
    // The other ranks would wait for this one in a collective, and this process's exit in
    // MPI_Finalize for them: a rank that fails to load ends every rank, with its message.
    if (rt.comm && rt.comm->world() > 1) rt.comm->abort_all(e.what());
    throw;
  }
  return rt;
}

void check_parallel_sizes(const RuntimeOptions& opts) {
  LLM_REQUIRE(opts.tensor_parallel >= 1) << "--tensor-parallel-size must be at least 1, got " << opts.tensor_parallel;
  LLM_REQUIRE(opts.pipeline_parallel >= 1) << "--pipeline-parallel-size must be at least 1, got " << opts.pipeline_parallel;
  const ModelConfig c = load_checkpoint_config(resolve_model(opts.model));
  check_tensor_parallel(c, opts.tensor_parallel);
  check_pipeline_parallel(c, opts.pipeline_parallel);
}

void serve_ranks(Runtime& rt) {
  LLM_CHECK(rt.is_worker_rank() && rt.comm) << "serve_ranks on rank " << rt.rank;
  auto* local = dynamic_cast<LocalExecutor*>(rt.executor.get());
  LLM_CHECK(local) << "rank " << rt.rank << " has no local executor";
  // Ctrl-C / SIGTERM reach every rank (mpirun forwards them): rank 0 decides when to stop (serve
  // finishes its requests) and then shuts this rank down; if it dies instead, mpirun ends the run.
  std::signal(SIGINT, SIG_IGN);
  std::signal(SIGTERM, SIG_IGN);
  serve_rank_steps(*local, *rt.comm);
}

}  // namespace llmctl
