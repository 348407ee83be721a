// The Phi-3 family (Phi3ForCausalLM: Phi-3 and Phi-3.5 mini and medium): Llama's layer
// (engine/model/llama/) over checkpoints that fuse q/k/v into one qkv_proj and gate/up into one
// gate_up_proj, a sliding window on every layer when config.json gives one, and LongRoPE
// (engine/model/layers/rope.cpp), rope over the first part of each head when partial_rotary_factor
// says so (Phi-4-mini). Made through the registry (engine/model/registry.h).
#pragma once
#include <memory>
#include <optional>

#include "engine/model/checkpoint.h"
#include "engine/model/model.h"
#include "engine/parallel/parallel_context.h"

namespace llmctl {

std::unique_ptr<Model> make_phi3_model(const Checkpoint& ckpt, Backend& backend, std::optional<DType> weight_dtype,
                                       const ParallelContext& par);

}  // namespace llmctl
