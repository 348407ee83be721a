// The Llama family's name map (Llama 2/3, SmolLM2, TinyLlama, Qwen2 with qkv bias): HF tensor
// names -> logical weights, with the fusions the forward uses (q/k/v -> qkv, gate/up -> gate_up).
#pragma once
#include <vector>

#include "engine/model/config.h"
#include "engine/model/weights/weight_source.h"

namespace llmctl {

// Embed, final norm, lm_head (tied: the embedding tensor, tied = true), then per layer: input norm,
// post-attention norm, qkv (+ qkv_bias when c.attention_bias), q/k head norms when c.qk_norm, o,
// gate_up, down.
std::vector<WeightSource> llama_weight_sources(const ModelConfig& c);

}  // namespace llmctl
