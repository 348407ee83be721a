// Rotary embedding variants: the frequencies of plain rope, linear, llama3, YaRN and LongRoPE
// scaling, computed once per model from its config, with YaRN's and LongRoPE's attention factor
// (RopeParams::attention_scaling).
#pragma once
#include "engine/backend/backend.h"
#include "engine/model/config.h"

namespace llmctl {

RopeParams make_rope_params(const ModelConfig& c);

}  // namespace llmctl
