// Phi-3 GGUF files as llama.cpp's convert_hf_to_gguf.py writes them (architecture phi3): q/k/v fused
// in attn_qkv, gate/up fused in ffn_up (2 I rows), phi3.attention.sliding_window (0: none), and for
// LongRoPE models the rope_factors_short / rope_factors_long tensors with
// phi3.rope.scaling.original_context_length and .attn_factor.
#pragma once
#include <string>

#include "engine/model/config.h"

namespace llmctl {

class GgufFile;

// The config's parts the common phi3.* keys do not give: the head size (hidden / heads) and partial
// rotary (phi3.rope.dimension_count below it), the sliding window, LongRoPE.
void phi3_gguf_config(const GgufFile& g, ModelConfig& c);
// A layer tensor's HF name where Phi-3's differs from the common map ("attn_qkv", "ffn_up").
const char* phi3_gguf_layer_name(const std::string& part);

}  // namespace llmctl
