// The one list of the tensors a Llama-family checkpoint holds (HF names and the shapes its
// ModelConfig implies), and the check every loaded checkpoint goes through before any kernel sees
// a weight: missing tensors named, shapes compared, tensors it has no place for refused.
#pragma once
#include <string>
#include <vector>

#include "engine/model/checkpoint.h"
#include "engine/model/weight_spec.h"

namespace llmctl {

// Embedding, final norm, then each layer's norms and projections (q/k/v biases when
// c.attention_bias); lm_head last when untied. c must be validated (sizes bounded).
std::vector<WeightSpec> llama_tensor_specs(const ModelConfig& c);

// Checks ck.tensors and ck.quantized against llama_tensor_specs(ck.config): throws InputError naming
// every missing tensor, every shape that differs from the expected one (both given), every non-float
// dense weight, every quantized weight that is inconsistent (GroupAffineWeight::validate) and every
// name both dense and quantized.
// Every other tensor is refused by name (InputError), but a tied lm_head.weight of the expected
// shape (accepted silently) and `*.rotary_emb.inv_freq` (returned as a note for callers to print).
std::vector<std::string> check_llama_tensors(const Checkpoint& ck);

}  // namespace llmctl
