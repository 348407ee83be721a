#include "engine/model/llama/llama_tensors.h"

#include <string>

namespace llmctl {

std::vector<WeightSpec> llama_tensor_specs(const ModelConfig& c) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, q = int64_t(c.num_heads) * c.head_dim,
                kv = int64_t(c.num_kv_heads) * c.head_dim;
  std::vector<WeightSpec> s = {{"model.embed_tokens.weight", {c.vocab_size, H}}, {"model.norm.weight", {H}, true}};
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    s.push_back({p + "input_layernorm.weight", {H}, true});
    s.push_back({p + "post_attention_layernorm.weight", {H}, true});
    s.push_back({p + "self_attn.q_proj.weight", {q, H}});
    s.push_back({p + "self_attn.k_proj.weight", {kv, H}});
    s.push_back({p + "self_attn.v_proj.weight", {kv, H}});
    if (c.attention_bias) {
      s.push_back({p + "self_attn.q_proj.bias", {q}});
      s.push_back({p + "self_attn.k_proj.bias", {kv}});
      s.push_back({p + "self_attn.v_proj.bias", {kv}});
    }
    if (c.qk_norm) {
      s.push_back({p + "self_attn.q_norm.weight", {c.head_dim}, true});
      s.push_back({p + "self_attn.k_norm.weight", {c.head_dim}, true});
    }
    s.push_back({p + "self_attn.o_proj.weight", {H, q}});
    s.push_back({p + "mlp.gate_proj.weight", {I, H}});
    s.push_back({p + "mlp.up_proj.weight", {I, H}});
    s.push_back({p + "mlp.down_proj.weight", {H, I}});
  }
  if (!c.tie_word_embeddings) s.push_back({"lm_head.weight", {c.vocab_size, H}});
  return s;
}

}  // namespace llmctl
