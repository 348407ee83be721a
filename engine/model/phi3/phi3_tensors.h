// Phi-3's checkpoint tensors by HF name, shapes from the config: qkv_proj [(Hq + 2 Hkv) D, H] and
// gate_up_proj [2 I, H] fused as the checkpoint stores them.
#pragma once
#include <vector>

#include "engine/model/config.h"
#include "engine/model/weight_spec.h"

namespace llmctl {

std::vector<WeightSpec> phi3_tensor_specs(const ModelConfig& c);

}  // namespace llmctl
