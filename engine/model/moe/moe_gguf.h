// The mixture-of-experts families as llama.cpp's converter writes them: qwen3moe, qwen2moe, and
// Mixtral as "llama" with expert tensors. Experts come stacked in one 3-D tensor per projection
// (blk.N.ffn_{gate,up,down}_exps, [E, rows, cols]); the loader (gguf_llama.cpp) cuts it into the
// per-expert HF tensors these functions name.
#pragma once
#include <string>

#include "engine/model/config.h"
#include "engine/model/gguf.h"

namespace llmctl {

// The <arch>.expert_* keys into c (experts, experts per token, their width, the shared expert's),
// the renormalization llama.cpp applies for the architecture (qwen3moe and Mixtral: yes, qwen2moe:
// no), and the layers without a router as dense.
void moe_gguf_config(const GgufFile& g, ModelConfig& c);

// Whether a "llama" file is Mixtral (it has experts).
bool gguf_llama_is_mixtral(const GgufFile& g);

// A layer part's HF name for the MoE families, or nullptr ("ffn_gate_inp" -> "mlp.gate").
const char* qwen_moe_gguf_layer_name(const std::string& part);
const char* mixtral_gguf_layer_name(const std::string& part);

// "ffn_gate_exps" of layer `layer`, expert e -> "model.layers.<layer>.mlp.experts.<e>.gate_proj.weight"
// (Mixtral: block_sparse_moe.experts.<e>.w1); empty when part is not a stacked expert tensor.
std::string qwen_moe_gguf_expert_name(const std::string& part, int layer, int expert);
std::string mixtral_gguf_expert_name(const std::string& part, int layer, int expert);

}  // namespace llmctl
