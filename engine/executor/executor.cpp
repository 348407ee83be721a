#include "engine/executor/executor.h"

#include "engine/core/error.h"

namespace llmctl {

Tensor Executor::execute_to_host(const BatchPlan& plan) {
  Tensor logits = execute(plan);
  if (logits.numel() == 0) return logits;
  // A copy: the buffer is overwritten by the next step (and a host backend may return it as is).
  return logits.device == Device::CPU ? convert_host(logits, DType::F32) : to_host(logits);
}

void Executor::submit(const BatchPlan& plan) {
  LLM_CHECK(!submitted_) << "submit: the previous step was not collected (one step in flight at most here)";
  submitted_ = execute(plan);
}

Tensor Executor::collect() {
  LLM_CHECK(submitted_) << "collect without a submitted step";
  Tensor t = std::move(*submitted_);
  submitted_.reset();
  return t;
}

}  // namespace llmctl
