// Gemma 2's and 3's name map: HF tensor names -> the decoder's logical weights (q/k/v -> qkv, gate/up ->
// gate_up fused), with the norms around attention and the MLP.
#pragma once
#include <vector>

#include "engine/model/config.h"
#include "engine/model/weights/weight_source.h"

namespace llmctl {

// Embed, final norm, lm_head (tied: the embedding tensor), then per layer: input norm,
// post-attention norm, pre- and post-feed-forward norms, qkv, q/k head norms (Gemma 3), o, gate_up, down.
std::vector<WeightSource> gemma_weight_sources(const ModelConfig& c);

}  // namespace llmctl
