#include "engine/model/weights/decoder_names.h"

namespace llmctl {

std::string hf_layer_prefix(int layer) { return "model.layers." + std::to_string(layer) + "."; }

void add_projection_specs(const ModelConfig& c, int layer, bool qkv_bias, bool qk_norm, std::vector<WeightSpec>& s,
                          bool mlp) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, q = int64_t(c.num_heads) * c.head_dim,
                kv = int64_t(c.num_kv_heads) * c.head_dim;
  const std::string p = hf_layer_prefix(layer);
  s.push_back({p + "self_attn.q_proj.weight", {q, H}});
  s.push_back({p + "self_attn.k_proj.weight", {kv, H}});
  s.push_back({p + "self_attn.v_proj.weight", {kv, H}});
  if (qkv_bias) {
    s.push_back({p + "self_attn.q_proj.bias", {q}});
    s.push_back({p + "self_attn.k_proj.bias", {kv}});
    s.push_back({p + "self_attn.v_proj.bias", {kv}});
  }
  if (qk_norm) {
    s.push_back({p + "self_attn.q_norm.weight", {c.head_dim}, true});
    s.push_back({p + "self_attn.k_norm.weight", {c.head_dim}, true});
  }
  s.push_back({p + "self_attn.o_proj.weight", {H, q}});
  if (!mlp) return;
  s.push_back({p + "mlp.gate_proj.weight", {I, H}});
  s.push_back({p + "mlp.up_proj.weight", {I, H}});
  s.push_back({p + "mlp.down_proj.weight", {H, I}});
}

void add_projection_sources(int layer, bool qkv_bias, bool qk_norm, std::vector<WeightSource>& s, bool dense_mlp) {
  const std::string hf = hf_layer_prefix(layer), ours = "layers." + std::to_string(layer) + ".";
  const std::string attn = hf + "self_attn.", mlp = hf + "mlp.";
  s.push_back({ours + "qkv", WeightRole::Qkv, layer, {attn + "q_proj.weight", attn + "k_proj.weight", attn + "v_proj.weight"}});
  if (qkv_bias)
    s.push_back({ours + "qkv_bias", WeightRole::QkvBias, layer, {attn + "q_proj.bias", attn + "k_proj.bias", attn + "v_proj.bias"}});
  if (qk_norm) {
    s.push_back({ours + "q_norm", WeightRole::Norm, layer, {attn + "q_norm.weight"}});
    s.push_back({ours + "k_norm", WeightRole::Norm, layer, {attn + "k_norm.weight"}});
  }
  s.push_back({ours + "o", WeightRole::O, layer, {attn + "o_proj.weight"}});
  if (!dense_mlp) return;
  s.push_back({ours + "gate_up", WeightRole::GateUp, layer, {mlp + "gate_proj.weight", mlp + "up_proj.weight"}});
  s.push_back({ours + "down", WeightRole::Down, layer, {mlp + "down_proj.weight"}});
}

std::vector<WeightSource> outer_sources(const ModelConfig& c) {
  const std::string embed = "model.embed_tokens.weight";
  return {
      {"embed", WeightRole::Embed, -1, {embed}, false},
      {"final_norm", WeightRole::Norm, -1, {"model.norm.weight"}, false},
      c.tie_word_embeddings ? WeightSource{"lm_head", WeightRole::LmHead, -1, {embed}, true}
                            : WeightSource{"lm_head", WeightRole::LmHead, -1, {"lm_head.weight"}, false},
  };
}

}  // namespace llmctl
