// Phi-3's name map: HF tensor names -> the decoder's logical weights. The checkpoint's own fusions
// are the decoder's (q, k, v rows in that order; gate rows then up rows), so each is one part.
#pragma once
#include <vector>

#include "engine/model/config.h"
#include "engine/model/weights/weight_source.h"

namespace llmctl {

// Embed, final norm, lm_head (tied: the embedding tensor), then per layer: input norm,
// post-attention norm, qkv, o, gate_up, down.
std::vector<WeightSource> phi3_weight_sources(const ModelConfig& c);

}  // namespace llmctl
