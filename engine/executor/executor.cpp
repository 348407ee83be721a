#include "engine/executor/executor.h"

#include "engine/core/error.h"

namespace llmctl {

StepOutput Executor::execute(const BatchPlan& plan, const StepSampling& sampling) {
  step_timer_begin();
  const Tensor logits = forward(plan);
  StepOutput out = sample(logits, sampling);
  out.device_seconds = step_timer_end();
  out.weight_bytes = step_weight_bytes();
  return out;
}

Tensor Executor::execute_to_host(const BatchPlan& plan) {
  Tensor logits = forward(plan);
  if (logits.numel() == 0) return logits;
  // A copy: the buffer is overwritten by the next step (and a host backend may return it as is).
  return logits.device == Device::CPU ? convert_host(logits, DType::F32) : to_host(logits);
}

void Executor::submit(const BatchPlan& plan, const StepSampling& sampling) {
  LLM_CHECK(!submitted_) << "submit: the previous step was not collected (one step in flight at most here)";
  submitted_ = execute(plan, sampling);
}

StepOutput Executor::collect() {
  LLM_CHECK(submitted_) << "collect without a submitted step";
  StepOutput out = std::move(*submitted_);
  submitted_.reset();
  return out;
}

}  // namespace llmctl
