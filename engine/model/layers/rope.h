// Rotary embedding variants: the frequencies of plain rope, linear scaling and llama3 scaling,
// computed once per model from its config.
#pragma once
#include "engine/backend/backend.h"
#include "engine/model/config.h"

namespace llmctl {

RopeParams make_rope_params(const ModelConfig& c);

}  // namespace llmctl
