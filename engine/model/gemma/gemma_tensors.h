// The tensors a Gemma 2 or 3 checkpoint holds (HF names, shapes from its ModelConfig): the Llama
// layout (with q/k norms: Gemma 3), and two more norms per layer around the MLP.
#pragma once
#include <vector>

#include "engine/model/config.h"
#include "engine/model/weight_spec.h"

namespace llmctl {

std::vector<WeightSpec> gemma_tensor_specs(const ModelConfig& c);

}  // namespace llmctl
