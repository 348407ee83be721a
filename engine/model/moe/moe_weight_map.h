// The mixture-of-experts families' tensors (Qwen3-MoE, Qwen2-MoE, Mixtral), by HF name: a Llama
// layer's attention (Qwen2-MoE's q/k/v biases, Qwen3-MoE's q/k norms) with, in a sparse layer, the
// router and every expert's projections instead of the dense MLP:
//   Qwen:    mlp.gate [E, H], mlp.experts.<e>.{gate,up,down}_proj, mlp.shared_expert.{gate,up,down}_proj,
//            mlp.shared_expert_gate [1, H]
//   Mixtral: block_sparse_moe.gate [E, H], block_sparse_moe.experts.<e>.{w1 (gate), w3 (up), w2 (down)}
#pragma once
#include <vector>

#include "engine/model/config.h"
#include "engine/model/weight_spec.h"
#include "engine/model/weights/weight_source.h"

namespace llmctl {

std::vector<WeightSpec> moe_tensor_specs(const ModelConfig& c);
std::vector<WeightSource> moe_weight_sources(const ModelConfig& c);

}  // namespace llmctl
