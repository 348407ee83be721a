// The tensors a Gemma 3 checkpoint holds (HF names, shapes from its ModelConfig): the Llama layout
// with q/k norms, and two more norms per layer around the MLP.
#pragma once
#include <vector>

#include "engine/model/config.h"
#include "engine/model/weight_spec.h"

namespace llmctl {

std::vector<WeightSpec> gemma3_tensor_specs(const ModelConfig& c);

}  // namespace llmctl
