// Gemma 2 and 3 GGUF files (general.architecture "gemma2" / "gemma3", as llama.cpp's
// convert_hf_to_gguf.py writes them) read as Gemma2ForCausalLM / Gemma3ForCausalLM: what the
// metadata does not say is what llama.cpp assumes (Gemma 2: every other layer slides; Gemma 3: a
// sliding layer pattern of 6 and rope base 1e4 on sliding layers; the attention scale).
#pragma once
#include <string>

#include "engine/model/config.h"
#include "engine/model/gguf.h"

namespace llmctl {

// The Gemma parts of c after the common metadata (c.num_layers, heads, head_dim, rope are set):
// GeGLU, the sliding window and which layers slide, the attention scale; Gemma 2's soft-capping;
// Gemma 3's sliding layers' rope base (Gemma 3 files with final logit soft-capping are refused by
// name: no Gemma 3 has it, and llama.cpp ignores it there).
void gemma2_gguf_config(const GgufFile& g, ModelConfig& c);
void gemma3_gguf_config(const GgufFile& g, ModelConfig& c);
// A Gemma layer tensor's HF name where it is not the Llama one: "post_attention_norm",
// "ffn_norm" (the pre-feed-forward norm), "post_ffw_norm"; nullptr for the others.
const char* gemma_gguf_layer_name(const std::string& part);

}  // namespace llmctl
