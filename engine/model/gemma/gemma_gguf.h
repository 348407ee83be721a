// Gemma 3 GGUF files (general.architecture "gemma3", as llama.cpp's convert_hf_to_gguf.py writes
// them) read as Gemma3ForCausalLM: what the gemma3.* metadata does not say is what llama.cpp
// assumes (a sliding layer pattern of 6, rope base 1e4 on sliding layers, the attention scale).
#pragma once
#include <string>

#include "engine/model/config.h"
#include "engine/model/gguf.h"

namespace llmctl {

// The Gemma parts of c after the common metadata (c.num_layers, heads, head_dim, rope are set):
// GeGLU, the sliding window and which layers slide, the sliding layers' rope base, the attention
// scale; refuses final logit soft-capping by name.
void gemma3_gguf_config(const GgufFile& g, ModelConfig& c);

// A gemma3 layer tensor's HF name where it is not the Llama one: "post_attention_norm",
// "ffn_norm" (the pre-feed-forward norm), "post_ffw_norm"; nullptr for the others.
const char* gemma3_gguf_layer_name(const std::string& part);

}  // namespace llmctl
