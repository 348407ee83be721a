// The tensors every decoder family here shares, by HF name: the embedding, the final norm and an
// untied lm_head; per layer the q/k/v projections (their biases, q/k head norms), o and the gated
// MLP. A family's tensor list and name map (engine/model/<family>/) add its own layer norms around
// these.
#pragma once
#include <string>
#include <vector>

#include "engine/model/config.h"
#include "engine/model/weight_spec.h"
#include "engine/model/weights/weight_source.h"

namespace llmctl {

// "model.layers.<i>."
std::string hf_layer_prefix(int layer);

// Layer `layer`'s projections as tensors with their shapes: q, k, v (+ biases when qkv_bias),
// q/k norms [head_dim] when qk_norm, o, gate, up, down.
// mlp false: no dense MLP (a mixture-of-experts layer's tensors come from its family).
void add_projection_specs(const ModelConfig& c, int layer, bool qkv_bias, bool qk_norm, std::vector<WeightSpec>& s,
                          bool mlp = true);

// The same as logical weights: qkv fused (+ qkv_bias), q_norm, k_norm, o, gate_up fused, down.
void add_projection_sources(int layer, bool qkv_bias, bool qk_norm, std::vector<WeightSource>& s, bool dense_mlp = true);

// embed, final_norm, lm_head (tied: the embedding tensor, tied = true).
std::vector<WeightSource> outer_sources(const ModelConfig& c);

}  // namespace llmctl
