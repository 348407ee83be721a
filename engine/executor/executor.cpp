#include "engine/executor/executor.h"

namespace llmctl {

Tensor Executor::execute_to_host(const BatchPlan& plan) {
  Tensor logits = execute(plan);
  if (logits.numel() == 0) return logits;
  // A copy: the buffer is overwritten by the next step (and a host backend may return it as is).
  return logits.device == Device::CPU ? convert_host(logits, DType::F32) : to_host(logits);
}

}  // namespace llmctl
