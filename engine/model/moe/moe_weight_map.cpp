#include "engine/model/moe/moe_weight_map.h"

#include <string>

#include "engine/model/weights/decoder_names.h"

namespace llmctl {

namespace {
struct ExpertNames {
  std::string block, gate, up, down;  // block: "mlp." or "block_sparse_moe."
};
ExpertNames expert_names(const ModelConfig& c) {
  if (c.architecture == "MixtralForCausalLM") return {"block_sparse_moe.", "w1", "w3", "w2"};
  return {"mlp.", "gate_proj", "up_proj", "down_proj"};
}
}  // namespace

std::vector<WeightSpec> moe_tensor_specs(const ModelConfig& c) {
  const int64_t H = c.hidden_size, I = c.moe_intermediate_size, S = c.shared_expert_intermediate_size;
  const ExpertNames n = expert_names(c);
  std::vector<WeightSpec> s = {{"model.embed_tokens.weight", {c.vocab_size, H}}, {"model.norm.weight", {H}, true}};
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = hf_layer_prefix(i);
    s.push_back({p + "input_layernorm.weight", {H}, true});
    s.push_back({p + "post_attention_layernorm.weight", {H}, true});
    const bool moe = c.layer_is_moe(i);
    add_projection_specs(c, i, c.attention_bias, c.qk_norm, s, !moe);
    if (!moe) continue;
    const std::string b = p + n.block;
    s.push_back({b + "gate.weight", {c.num_experts, H}});
    for (int e = 0; e < c.num_experts; ++e) {
      const std::string x = b + "experts." + std::to_string(e) + ".";
      s.push_back({x + n.gate + ".weight", {I, H}});
      s.push_back({x + n.up + ".weight", {I, H}});
      s.push_back({x + n.down + ".weight", {H, I}});
    }
    if (S > 0) {
      s.push_back({b + "shared_expert.gate_proj.weight", {S, H}});
      s.push_back({b + "shared_expert.up_proj.weight", {S, H}});
      s.push_back({b + "shared_expert.down_proj.weight", {H, S}});
      s.push_back({b + "shared_expert_gate.weight", {1, H}});
    }
  }
  if (!c.tie_word_embeddings) s.push_back({"lm_head.weight", {c.vocab_size, H}});
  return s;
}

std::vector<WeightSource> moe_weight_sources(const ModelConfig& c) {
  const ExpertNames n = expert_names(c);
  std::vector<WeightSource> s = outer_sources(c);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string hf = hf_layer_prefix(i), ours = "layers." + std::to_string(i) + ".";
    s.push_back({ours + "input_norm", WeightRole::Norm, i, {hf + "input_layernorm.weight"}});
    s.push_back({ours + "post_norm", WeightRole::Norm, i, {hf + "post_attention_layernorm.weight"}});
    const bool moe = c.layer_is_moe(i);
    add_projection_sources(i, c.attention_bias, c.qk_norm, s, !moe);
    if (!moe) continue;
    const std::string b = hf + n.block;
    s.push_back({ours + "router", WeightRole::Router, i, {b + "gate.weight"}});
    for (int e = 0; e < c.num_experts; ++e) {
      const std::string x = b + "experts." + std::to_string(e) + ".", o = ours + "experts." + std::to_string(e) + ".";
      s.push_back({o + "gate_up", WeightRole::ExpertGateUp, i, {x + n.gate + ".weight", x + n.up + ".weight"}, false, e});
      s.push_back({o + "down", WeightRole::ExpertDown, i, {x + n.down + ".weight"}, false, e});
    }
    if (c.shared_expert_intermediate_size > 0) {
      const std::string x = b + "shared_expert.";
      s.push_back({ours + "shared_expert.gate_up", WeightRole::SharedGateUp, i,
                   {x + "gate_proj.weight", x + "up_proj.weight"}});
      s.push_back({ours + "shared_expert.down", WeightRole::SharedDown, i, {x + "down_proj.weight"}});
      s.push_back({ours + "shared_gate", WeightRole::SharedGate, i, {b + "shared_expert_gate.weight"}});
    }
  }
  return s;
}

}  // namespace llmctl
