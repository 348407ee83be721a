// The Llama family (LlamaForCausalLM, Qwen2ForCausalLM with qkv bias, Qwen3ForCausalLM with q/k
// norms, MistralForCausalLM; sliding windows on the layers the config names; SmolLM2 and TinyLlama
// are Llamas): a decoder composed of the shared
// blocks in engine/model/layers/. Made through the registry (engine/model/registry.h).
#pragma once
#include <memory>
#include <optional>
#include <vector>

#include "engine/model/checkpoint.h"
#include "engine/model/layers/attention_block.h"
#include "engine/model/layers/gated_mlp.h"
#include "engine/model/layers/rms_norm.h"
#include "engine/model/model.h"
#include "engine/parallel/parallel_context.h"

namespace llmctl {

// The weights of a Llama-family model on a backend.
struct LlamaWeights {
  struct Layer {
    RmsNorm input_norm, post_norm;
    AttentionBlock attention;
    GatedMlp mlp;
  };
  DType weight_dtype = DType::F32;
  // [V, H] (tensor parallel: this rank's V / world ids): a dense table in weight_dtype, or, for a
  // tied quantized table on a backend that looks rows up in it, the quantized lm_head itself.
  LinearWeight embed;
  int64_t vocab_begin = 0;  // the first token id of embed's and lm_head's rows
  LinearWeight lm_head;   // [V, H]; shares embed's storage when tied
  RmsNorm final_norm;
  std::vector<Layer> layers;  // pipeline parallel: this stage's, from layer_begin
  int layer_begin = 0;
  std::vector<KvScales> kv_scales;  // fp8 KV cache scales per layer (host), empty when the checkpoint has none
};

// Checks the checkpoint against the config and uploads every weight (q/k/v fused, gate/up fused;
// linears in weight_dtype, or as stored when nullopt; norms and biases f32): rank par.rank's
// Megatron share of each (engine/model/weights/megatron_split.h), after refusing a world size
// the shapes do not divide. The one place a Llama-family model reads a checkpoint.
LlamaWeights load_llama_weights(const Checkpoint& ckpt, Backend& backend, std::optional<DType> weight_dtype,
                                const ParallelContext& par = {});

// Throws InputError for a Llama-family config with a part the family does not implement (an o_proj
// bias: HF Llama's attention_bias).
void check_llama_supported(const ModelConfig& c);

std::unique_ptr<Model> make_llama_model(const Checkpoint& ckpt, Backend& backend, std::optional<DType> weight_dtype,
                                        const ParallelContext& par);

}  // namespace llmctl
