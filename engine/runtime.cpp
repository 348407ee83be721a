#include "engine/runtime.h"

#include <chrono>

#include "engine/model/default_model.h"

namespace llmctl {

Runtime load_runtime(const RuntimeOptions& opts) {
  auto t0 = std::chrono::steady_clock::now();
  Runtime rt;
  rt.model_path = resolve_model(opts.model);
  LoadOptions lo;
  lo.dtype = opts.dtype;
  Checkpoint ckpt = load_checkpoint(rt.model_path, lo);
  rt.config = ckpt.config;
  rt.tokenizer = load_tokenizer(ckpt);
  rt.backend = make_cpu_backend(opts.threads);
  rt.model = std::make_unique<LlamaModel>(ckpt, *rt.backend, opts.dtype);
  rt.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rt;
}

}  // namespace llmctl
