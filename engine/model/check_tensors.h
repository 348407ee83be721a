// The check every loaded checkpoint goes through before any kernel sees a weight, against the
// tensors its architecture's family lists (model_tensor_specs, engine/model/registry.h): missing
// tensors named, shapes compared, tensors it has no place for refused.
#pragma once
#include <string>
#include <vector>

#include "engine/model/checkpoint.h"

namespace llmctl {

// Checks ck.tensors and ck.quantized against model_tensor_specs(ck.config): throws InputError naming
// every missing tensor, every shape that differs from the expected one (both given), every non-float
// dense weight, every quantized weight that is inconsistent (GroupAffineWeight::validate) and every
// name both dense and quantized.
// Every other tensor is refused by name (InputError), but a tied lm_head.weight of the expected
// shape (accepted silently) and `*.rotary_emb.inv_freq` (returned as a note for callers to print).
std::vector<std::string> check_checkpoint_tensors(const Checkpoint& ck);

}  // namespace llmctl
