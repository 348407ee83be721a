#include "engine/model/phi3/phi3_tensors.h"

#include <string>

#include "engine/model/weights/decoder_names.h"

namespace llmctl {

std::vector<WeightSpec> phi3_tensor_specs(const ModelConfig& c) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, q = int64_t(c.num_heads) * c.head_dim,
                qkv = int64_t(c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  std::vector<WeightSpec> s = {{"model.embed_tokens.weight", {c.vocab_size, H}}, {"model.norm.weight", {H}, true}};
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = hf_layer_prefix(i);
    s.push_back({p + "input_layernorm.weight", {H}, true});
    s.push_back({p + "post_attention_layernorm.weight", {H}, true});
    s.push_back({p + "self_attn.qkv_proj.weight", {qkv, H}});
    s.push_back({p + "self_attn.o_proj.weight", {H, q}});
    s.push_back({p + "mlp.gate_up_proj.weight", {2 * I, H}});
    s.push_back({p + "mlp.down_proj.weight", {H, I}});
  }
  if (!c.tie_word_embeddings) s.push_back({"lm_head.weight", {c.vocab_size, H}});
  return s;
}

}  // namespace llmctl
