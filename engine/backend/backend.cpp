#include "engine/backend/backend.h"

#include "engine/core/error.h"

namespace llmctl {

std::vector<int32_t> Backend::sample(const Tensor&, const std::vector<SampleJob>&) {
  LLM_CHECK(false) << name() << " does not sample on the device";
  return {};
}

}  // namespace llmctl
