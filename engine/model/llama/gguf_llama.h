// GGUF files of the registry's architectures ("llama", "qwen2", "qwen3", "gemma3": its gguf_name)
// in canonical (HF) form: ModelConfig from <arch>.* metadata, tensor names mapped to
// transformers' names, llama.cpp's q/k row permutation undone where its converter applied it
// (Architecture::gguf_qk_permuted; Qwen's rows are stored as they are).
#pragma once
#include <string>

#include "engine/model/checkpoint.h"
#include "engine/model/gguf.h"
#include "engine/model/registry.h"

namespace llmctl {

// Throws InputError for other architectures (named) or missing/inconsistent metadata.
ModelConfig gguf_llama_config(const GgufFile& g);

// "blk.3.attn_q.weight" -> "model.layers.3.self_attn.q_proj.weight"; empty when not a known name.
// A family's own layer names (Architecture::gguf_layer_name) come first.
std::string gguf_to_hf_name(const std::string& gguf_name, const Architecture* family = nullptr);

// Undoes llama.cpp's rope permutation of q/k rows for n_head heads (n_head = num_kv_heads for k),
// as transformers does when it loads GGUF: rows (head, i, pair) -> (head, pair, i). Works on the
// first dimension of a host tensor of any dtype (weights [out, in] and biases [out]); returns a copy.
Tensor gguf_unpermute_qk(const Tensor& t, int n_head);

// The whole checkpoint from an open GGUF file (see load_checkpoint).
Checkpoint load_gguf_checkpoint(std::shared_ptr<const GgufFile> g, const LoadOptions& opts);

}  // namespace llmctl
