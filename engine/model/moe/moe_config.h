// The config.json fields of the mixture-of-experts families (Qwen3-MoE, Mixtral, Qwen2-MoE): how
// many experts, how many per token, their width, the shared expert, which layers stay dense.
#pragma once
#include <nlohmann/json.hpp>

#include "engine/model/config.h"

namespace llmctl {

// Qwen3MoeForCausalLM / Qwen2MoeForCausalLM: num_experts (transformers 5 writes num_local_experts),
// num_experts_per_tok, moe_intermediate_size, norm_topk_prob, decoder_sparse_step, mlp_only_layers;
// Qwen2-MoE also shared_expert_intermediate_size and qkv_bias.
void qwen_moe_hf_config(const nlohmann::json& j, ModelConfig& c);
// MixtralForCausalLM: num_local_experts of intermediate_size each, num_experts_per_tok, always
// renormalized.
void mixtral_hf_config(const nlohmann::json& j, ModelConfig& c);

// Ranges and consistency (InputError giving the numbers).
void validate_moe(const ModelConfig& c);
// The fields back into config.json, as the architecture spells them.
void moe_hf_json(const ModelConfig& c, nlohmann::json& j);

}  // namespace llmctl
