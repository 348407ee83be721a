#include "engine/runtime.h"

#include <chrono>
#include <iostream>

#include "engine/core/error.h"
#include "engine/executor/local_executor.h"
#include "engine/model/default_model.h"
#include "engine/model/registry.h"
#ifdef LLMCTL_HAVE_CUDA
#include "engine/backend/cuda/cuda_backend.h"
#endif

namespace llmctl {

Runtime load_runtime(const RuntimeOptions& opts) {
  auto t0 = std::chrono::steady_clock::now();
  Runtime rt;
  rt.model_path = resolve_model(opts.model);
  LLM_REQUIRE(opts.device == "auto" || opts.device == "cpu" || opts.device == "cuda")
      << "unknown device '" << opts.device << "' (expected auto, cpu or cuda)";
  std::optional<DType> weight_dtype = opts.dtype;
#ifdef LLMCTL_HAVE_CUDA
  if (opts.device == "cuda" || (opts.device == "auto" && cuda_device_available())) {
    LLM_REQUIRE(cuda_device_available()) << "--device cuda: no CUDA device is available";
    // Activations in bf16 unless f16 weights were asked for; weights in the compute dtype.
    const DType compute = opts.dtype == DType::F16 ? DType::F16 : DType::BF16;
    CudaOptions co;
    co.graphs = !opts.enforce_eager;
    co.deterministic = opts.deterministic;
    co.autotune_dir = llmctl_home();  // measured GEMM algorithms, reused by later runs
    rt.backend = make_cuda_backend(compute, 0, co);
    weight_dtype = compute;
  }
#else
  LLM_REQUIRE(opts.device != "cuda") << "--device cuda: this llmctl was built without CUDA";
#endif
  if (!rt.backend) rt.backend = make_cpu_backend(opts.threads, opts.act_quant);
  // The backend is chosen first: quantized linears stay quantized only for one that runs them;
  // otherwise the checkpoint dequantizes them as it always has.
  LoadOptions lo;
  lo.dtype = opts.dtype;
  lo.keep_quantized = rt.backend->supports(WeightFormat::Int4Group) && rt.backend->supports(WeightFormat::Int8Group);
  Checkpoint ckpt = load_checkpoint(rt.model_path, lo);
  rt.config = ckpt.config;
  rt.tokenizer = load_tokenizer(ckpt);
  rt.quantized_linears = !ckpt.quantized.empty();
  rt.model = make_model(ckpt, *rt.backend, weight_dtype);
  rt.executor = std::make_unique<LocalExecutor>(*rt.model, opts.kv_cache_dtype);  // refuses a KV dtype the backend lacks
  if (opts.kv_cache_dtype == KvCacheDtype::Fp8 && rt.model->kv_scales().empty())
    std::cerr << "llmctl: warning: --kv-cache-dtype fp8 without k_scale/v_scale in the checkpoint: using scale 1.0 "
                 "for every layer (accuracy may suffer; calibrate them with llmctl quantize --kv-cache fp8)\n";
  rt.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rt;
}

}  // namespace llmctl
