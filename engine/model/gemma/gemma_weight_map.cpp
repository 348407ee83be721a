#include "engine/model/gemma/gemma_weight_map.h"

#include <string>

namespace llmctl {

std::vector<WeightSource> gemma3_weight_sources(const ModelConfig& c) {
  const std::string embed = "model.embed_tokens.weight";
  std::vector<WeightSource> s = {
      {"embed", WeightRole::Embed, -1, {embed}, false},
      {"final_norm", WeightRole::Norm, -1, {"model.norm.weight"}, false},
      c.tie_word_embeddings ? WeightSource{"lm_head", WeightRole::LmHead, -1, {embed}, true}
                            : WeightSource{"lm_head", WeightRole::LmHead, -1, {"lm_head.weight"}, false},
  };
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string hf = "model.layers." + std::to_string(i) + ".", ours = "layers." + std::to_string(i) + ".";
    const std::string attn = hf + "self_attn.", mlp = hf + "mlp.";
    s.push_back({ours + "input_norm", WeightRole::Norm, i, {hf + "input_layernorm.weight"}});
    s.push_back({ours + "post_norm", WeightRole::Norm, i, {hf + "post_attention_layernorm.weight"}});
    s.push_back({ours + "pre_ff_norm", WeightRole::Norm, i, {hf + "pre_feedforward_layernorm.weight"}});
    s.push_back({ours + "post_ff_norm", WeightRole::Norm, i, {hf + "post_feedforward_layernorm.weight"}});
    s.push_back({ours + "qkv", WeightRole::Qkv, i, {attn + "q_proj.weight", attn + "k_proj.weight", attn + "v_proj.weight"}});
    s.push_back({ours + "q_norm", WeightRole::Norm, i, {attn + "q_norm.weight"}});
    s.push_back({ours + "k_norm", WeightRole::Norm, i, {attn + "k_norm.weight"}});
    s.push_back({ours + "o", WeightRole::O, i, {attn + "o_proj.weight"}});
    s.push_back({ours + "gate_up", WeightRole::GateUp, i, {mlp + "gate_proj.weight", mlp + "up_proj.weight"}});
    s.push_back({ours + "down", WeightRole::Down, i, {mlp + "down_proj.weight"}});
  }
  return s;
}

}  // namespace llmctl
