#include "engine/model/random_checkpoint.h"

#include <random>

#include "engine/model/registry.h"

namespace llmctl {

Checkpoint random_checkpoint(const ModelConfig& c, uint32_t seed, float stddev) {
  Checkpoint ck;
  ck.config = c;
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, stddev);
  for (const WeightSpec& spec : model_tensor_specs(c)) {
    Tensor t = Tensor::empty_host(DType::F32, spec.shape);
    const float base = spec.norm ? 1.0f : 0.0f;
    for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = base + d(rng);
    ck.tensors[spec.name] = t;
  }
  return ck;
}

}  // namespace llmctl
