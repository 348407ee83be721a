#include "engine/model/gemma/gemma_tensors.h"

#include <string>

namespace llmctl {

std::vector<WeightSpec> gemma3_tensor_specs(const ModelConfig& c) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, D = c.head_dim, q = int64_t(c.num_heads) * D,
                kv = int64_t(c.num_kv_heads) * D;
  std::vector<WeightSpec> s = {{"model.embed_tokens.weight", {c.vocab_size, H}}, {"model.norm.weight", {H}, true}};
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    for (const char* norm : {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                             "post_feedforward_layernorm"})
      s.push_back({p + norm + ".weight", {H}, true});
    s.push_back({p + "self_attn.q_proj.weight", {q, H}});
    s.push_back({p + "self_attn.k_proj.weight", {kv, H}});
    s.push_back({p + "self_attn.v_proj.weight", {kv, H}});
    s.push_back({p + "self_attn.q_norm.weight", {D}, true});
    s.push_back({p + "self_attn.k_norm.weight", {D}, true});
    s.push_back({p + "self_attn.o_proj.weight", {H, q}});
    s.push_back({p + "mlp.gate_proj.weight", {I, H}});
    s.push_back({p + "mlp.up_proj.weight", {I, H}});
    s.push_back({p + "mlp.down_proj.weight", {H, I}});
  }
  if (!c.tie_word_embeddings) s.push_back({"lm_head.weight", {c.vocab_size, H}});
  return s;
}

}  // namespace llmctl
