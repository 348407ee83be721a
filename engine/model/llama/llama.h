// The Llama family (LlamaForCausalLM, Qwen2ForCausalLM with qkv bias, Qwen3ForCausalLM with q/k
// norms, MistralForCausalLM; sliding windows on the layers the config names; SmolLM2 and TinyLlama
// are Llamas): the pre-norm decoder (engine/model/decoder_model.h) with this family's name map.
// Made through the registry (engine/model/registry.h).
#pragma once
#include <memory>
#include <optional>
#include <vector>

#include "engine/model/checkpoint.h"
#include "engine/model/model.h"
#include "engine/model/weights/weight_source.h"
#include "engine/parallel/parallel_context.h"

namespace llmctl {

// Throws InputError for a Llama-family config with a part the family does not implement (an o_proj
// bias: HF Llama's attention_bias).
void check_llama_supported(const ModelConfig& c);

std::unique_ptr<Model> make_llama_model(const Checkpoint& ckpt, Backend& backend, std::optional<DType> weight_dtype,
                                        const ParallelContext& par);

// The same layers over another family's name map (a family whose checkpoint names or fusions
// differ but whose layer is Llama's: Phi-3's fused qkv_proj / gate_up_proj).
std::unique_ptr<Model> make_llama_layers_model(const Checkpoint& ckpt, Backend& backend,
                                               std::optional<DType> weight_dtype, const ParallelContext& par,
                                               std::vector<WeightSource> sources);

}  // namespace llmctl
