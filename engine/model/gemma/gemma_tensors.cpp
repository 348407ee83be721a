#include "engine/model/gemma/gemma_tensors.h"

#include <string>

#include "engine/model/weights/decoder_names.h"

namespace llmctl {

std::vector<WeightSpec> gemma_tensor_specs(const ModelConfig& c) {
  const int64_t H = c.hidden_size;
  std::vector<WeightSpec> s = {{"model.embed_tokens.weight", {c.vocab_size, H}}, {"model.norm.weight", {H}, true}};
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = hf_layer_prefix(i);
    for (const char* norm : {"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                             "post_feedforward_layernorm"})
      s.push_back({p + norm + ".weight", {H}, true});
    add_projection_specs(c, i, /*qkv_bias=*/false, /*qk_norm=*/c.qk_norm, s);
  }
  if (!c.tie_word_embeddings) s.push_back({"lm_head.weight", {c.vocab_size, H}});
  return s;
}

}  // namespace llmctl
