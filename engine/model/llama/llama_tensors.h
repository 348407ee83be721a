// The one list of the tensors a Llama-family checkpoint holds: HF names and the shapes its
// ModelConfig implies (the registry's tensor_specs for this family's architectures).
#pragma once
#include <vector>

#include "engine/model/config.h"
#include "engine/model/weight_spec.h"

namespace llmctl {

// Embedding, final norm, then each layer's norms and projections (q/k/v biases when
// c.attention_bias, q/k norms when c.qk_norm); lm_head last when untied. c must be validated
// (sizes bounded).
std::vector<WeightSpec> llama_tensor_specs(const ModelConfig& c);

}  // namespace llmctl
