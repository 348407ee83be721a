#include "engine/model/registry.h"

#include "engine/core/error.h"
#include "engine/model/gemma/gemma.h"
#include "engine/model/gemma/gemma_gguf.h"
#include "engine/model/gemma/gemma_tensors.h"
#include "engine/model/llama/llama.h"
#include "engine/model/llama/llama_tensors.h"
#include "engine/model/moe/moe_config.h"
#include "engine/model/moe/moe_gguf.h"
#include "engine/model/moe/moe_model.h"
#include "engine/model/moe/moe_weight_map.h"
#include "engine/model/phi3/phi3.h"
#include "engine/model/phi3/phi3_gguf.h"
#include "engine/model/phi3/phi3_tensors.h"

namespace llmctl {

namespace {

std::string names(const char* Architecture::*field) {
  std::string out;
  for (const Architecture& a : architectures()) {
    if (!(a.*field)) continue;
    out += (out.empty() ? "" : ", ") + std::string(a.*field);
  }
  return out;
}

}  // namespace

const std::vector<Architecture>& architectures() {
  // Mistral is a Llama whose layers slide by default; Qwen2 is a Llama with q/k/v biases; Qwen3 one with a norm on
  // each head of q and k. llama.cpp writes Mistral as "llama"; it keeps Qwen's q/k rows as they are.
  // Phi-3 is Llama's layer over fused qkv_proj / gate_up_proj tensors (engine/model/phi3/), its
  // sliding window on every layer. Gemma 2 and 3 are their own family (engine/model/gemma/), with its
  // GGUF conventions.
  static const std::vector<Architecture> kArchitectures = {
      {"LlamaForCausalLM", "llama", "llama", false, false, false, true, &make_llama_model, &llama_tensor_specs},
      {"MistralForCausalLM", "mistral", nullptr, false, true, false, true, &make_llama_model, &llama_tensor_specs},
      {"Qwen2ForCausalLM", "qwen2", "qwen2", true, false, false, false, &make_llama_model, &llama_tensor_specs},
      {"Qwen3ForCausalLM", "qwen3", "qwen3", false, false, true, false, &make_llama_model, &llama_tensor_specs},
      {"Phi3ForCausalLM", "phi3", "phi3", false, true, false, false, &make_phi3_model, &phi3_tensor_specs,
       &phi3_gguf_config, &phi3_gguf_layer_name, 0.0f},
      {"Gemma2ForCausalLM", "gemma2", "gemma2", false, true, false, false, &make_gemma_model, &gemma_tensor_specs,
       &gemma2_gguf_config, &gemma_gguf_layer_name, 1.0f, /*sliding_pattern=*/2, "pre_feedforward_layernorm", 1.0f},
      {"Gemma3ForCausalLM", "gemma3_text", "gemma3", false, true, true, false, &make_gemma_model, &gemma_tensor_specs,
       &gemma3_gguf_config, &gemma_gguf_layer_name, 1.0f, 0, "pre_feedforward_layernorm", 1.0f},
      // Mixtures of experts (engine/model/moe/): Llama's layer with a MoE block in the sparse layers.
      {"Qwen3MoeForCausalLM", "qwen3_moe", "qwen3moe", false, false, true, false, &make_moe_model, &moe_tensor_specs,
       &moe_gguf_config, &qwen_moe_gguf_layer_name, 0.0f, 0, "post_attention_layernorm", 0.0f, &qwen_moe_hf_config,
       nullptr, nullptr, &qwen_moe_gguf_expert_name, &moe_weight_sources},
      {"Qwen2MoeForCausalLM", "qwen2_moe", "qwen2moe", true, false, false, false, &make_moe_model, &moe_tensor_specs,
       &moe_gguf_config, &qwen_moe_gguf_layer_name, 0.0f, 0, "post_attention_layernorm", 0.0f, &qwen_moe_hf_config,
       nullptr, nullptr, &qwen_moe_gguf_expert_name, &moe_weight_sources},
      // Mixtral's GGUF is "llama" with expert tensors.
      {"MixtralForCausalLM", "mixtral", nullptr, false, true, false, true, &make_moe_model, &moe_tensor_specs,
       &moe_gguf_config, &mixtral_gguf_layer_name, 0.0f, 0, "post_attention_layernorm", 0.0f, &mixtral_hf_config,
       "llama", &gguf_llama_is_mixtral, &mixtral_gguf_expert_name, &moe_weight_sources},
  };
  return kArchitectures;
}

const Architecture& find_architecture(const std::string& hf_name) {
  for (const Architecture& a : architectures())
    if (hf_name == a.name) return a;
  throw InputError("architecture '" + hf_name + "' is not supported (llmctl runs " + names(&Architecture::name) +
                   ")");
}

const Architecture& find_gguf_architecture(const std::string& gguf_name, const GgufFile* file) {
  if (file)
    for (const Architecture& a : architectures())
      if (a.gguf_variant_of && gguf_name == a.gguf_variant_of && a.gguf_is_variant(*file)) return a;
  for (const Architecture& a : architectures())
    if (a.gguf_name && gguf_name == a.gguf_name) return a;
  throw InputError("GGUF architecture '" + gguf_name + "' is not supported (llmctl reads GGUF files of architecture " +
                   names(&Architecture::gguf_name) + ")");
}

std::vector<WeightSpec> model_tensor_specs(const ModelConfig& c) {
  return find_architecture(c.architecture).tensor_specs(c);
}

std::unique_ptr<Model> make_model(const Checkpoint& ckpt, Backend& backend, std::optional<DType> weight_dtype,
                                  const ParallelContext& par) {
  return find_architecture(ckpt.config.architecture).make(ckpt, backend, weight_dtype, par);
}

}  // namespace llmctl
