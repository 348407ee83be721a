#include "engine/model/phi3/phi3_weight_map.h"

#include <string>

#include "engine/model/weights/decoder_names.h"

namespace llmctl {

std::vector<WeightSource> phi3_weight_sources(const ModelConfig& c) {
  std::vector<WeightSource> s = outer_sources(c);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string hf = hf_layer_prefix(i), ours = "layers." + std::to_string(i) + ".";
    s.push_back({ours + "input_norm", WeightRole::Norm, i, {hf + "input_layernorm.weight"}});
    s.push_back({ours + "post_norm", WeightRole::Norm, i, {hf + "post_attention_layernorm.weight"}});
    s.push_back({ours + "qkv", WeightRole::Qkv, i, {hf + "self_attn.qkv_proj.weight"}});
    s.push_back({ours + "o", WeightRole::O, i, {hf + "self_attn.o_proj.weight"}});
    s.push_back({ours + "gate_up", WeightRole::GateUp, i, {hf + "mlp.gate_up_proj.weight"}});
    s.push_back({ours + "down", WeightRole::Down, i, {hf + "mlp.down_proj.weight"}});
  }
  return s;
}

}  // namespace llmctl
