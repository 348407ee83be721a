#include "engine/model/gemma/gemma_weight_map.h"

#include <string>

#include "engine/model/weights/decoder_names.h"

namespace llmctl {

std::vector<WeightSource> gemma_weight_sources(const ModelConfig& c) {
  std::vector<WeightSource> s = outer_sources(c);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string hf = hf_layer_prefix(i), ours = "layers." + std::to_string(i) + ".";
    s.push_back({ours + "input_norm", WeightRole::Norm, i, {hf + "input_layernorm.weight"}});
    s.push_back({ours + "post_norm", WeightRole::Norm, i, {hf + "post_attention_layernorm.weight"}});
    s.push_back({ours + "pre_ff_norm", WeightRole::Norm, i, {hf + "pre_feedforward_layernorm.weight"}});
    s.push_back({ours + "post_ff_norm", WeightRole::Norm, i, {hf + "post_feedforward_layernorm.weight"}});
    add_projection_sources(i, /*qkv_bias=*/false, /*qk_norm=*/c.qk_norm, s);
  }
  return s;
}

}  // namespace llmctl
