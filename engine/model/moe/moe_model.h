// The mixture-of-experts families (Qwen3MoeForCausalLM, Qwen2MoeForCausalLM, MixtralForCausalLM):
// Llama's pre-norm layer (engine/model/llama/) with a MoeBlock (engine/model/layers/moe_block.h) in place of the dense
// MLP in each sparse layer (the config's dense_layers keep theirs). Made through the registry.
#pragma once
#include <memory>
#include <optional>

#include "engine/model/checkpoint.h"
#include "engine/model/model.h"
#include "engine/parallel/parallel_context.h"

namespace llmctl {

std::unique_ptr<Model> make_moe_model(const Checkpoint& ckpt, Backend& backend, std::optional<DType> weight_dtype,
                                      const ParallelContext& par);

}  // namespace llmctl
