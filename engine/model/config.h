// ModelConfig: the hyper-parameters of a Llama-family decoder, read from an HF config.json or
// from GGUF metadata. Unknown architectures are refused by name (engine/model/registry.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <optional>

#include <nlohmann/json.hpp>

#include "quant/format/checkpoint_layout.h"

namespace llmctl {

// Upper bounds a config (HF or GGUF) must stay under: far above any released Llama-family model
// (largest today: 126 layers, hidden 16384, vocab 262144), low enough that nothing sized from
// them (tensor lists, shapes, workspaces) can overflow or exhaust memory before the weights are
// checked against them.
struct ConfigLimits {
  static constexpr int kMaxLayers = 1024;
  static constexpr int kMaxHidden = 1 << 17;
  static constexpr int kMaxHeads = 1024;
  static constexpr int kMaxHeadDim = 1024;
  static constexpr int kMaxIntermediate = 1 << 20;
  static constexpr int kMaxPositions = 1 << 24;
};
// The largest vocabulary (model or tokenizer) llmctl accepts; token ids are below it.
inline constexpr int kMaxVocabSize = 1 << 21;

struct RopeScaling {
  std::string type = "none";  // none | linear | llama3 | yarn | longrope | freq_factors
  float factor = 1.0f;
  float low_freq_factor = 1.0f;              // llama3
  float high_freq_factor = 4.0f;             // llama3
  int original_max_position_embeddings = 0;  // llama3, yarn, longrope
  // yarn (transformers' _compute_yarn_parameters): frequencies blended between interpolated and
  // extrapolated over the dimensions [beta_fast's, beta_slow's) rotations fall in (floored and
  // ceiled when truncate), and cos / sin multiplied by attention_factor (given, or from factor and
  // mscale / mscale_all_dim).
  float beta_fast = 32.0f, beta_slow = 1.0f;
  bool truncate = true;
  float attention_factor = 1.0f;  // yarn, longrope
  // longrope (Phi-3.5, Phi-4-mini; transformers' _compute_longrope_parameters): frequency i divided
  // by short_factor[i] below original_max_position_embeddings and by long_factor[i] from it, cos /
  // sin multiplied by attention_factor (given, or sqrt(1 + ln(factor) / ln(original)), factor
  // being max_position_embeddings / original when absent). [head_dim / 2] each.
  std::vector<float> short_factor, long_factor;
  // freq_factors: a GGUF's rope_freqs.weight applied as it is (llama.cpp's way): frequency i is
  // divided by freq_factors[i] ([head_dim / 2]). No config.json spelling: convert refuses it.
  std::vector<float> freq_factors;
};

struct ModelConfig {
  std::string architecture = "LlamaForCausalLM";  // HF class name
  std::string model_type = "llama";
  int hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int intermediate_size = 0;
  int vocab_size = 0;
  int max_position_embeddings = 2048;
  float rms_norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  // Partial rotary (partial_rotary_factor x head_dim; Phi-4-mini): rope turns each head's first
  // rotary_dim dimensions; 0: all of them.
  int rotary_dim = 0;
  int rotary() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v projections carry a bias (Qwen2)
  bool qk_norm = false;         // RMSNorm over each head of q and k before rope (Qwen3; from the architecture)
  // Sliding-window attention: a token at position p reads keys (p - sliding_window, p] on the
  // sliding layers. sliding_window 0: none, every layer reads the whole context. sliding_layers:
  // which layers slide ([num_layers]; empty: all of them, as Mistral's).
  int sliding_window = 0;
  std::vector<bool> sliding_layers;
  // The sliding layers' own rope base (plain rope; transformers 5's rope_parameters per layer type,
  // Gemma 3's rope_local_base_freq); 0: they take the config's rope like the others.
  float sliding_rope_theta = 0;
  std::string hidden_act = "silu";   // the gated MLP's activation: silu | gelu_pytorch_tanh (GeGLU)
  float query_pre_attn_scalar = 0;   // > 0: attention scores scaled by its ^-1/2 (Gemma), not head_dim's
  // Gemma 2's soft-capping (0: none): attention scores s become c * tanh(s / c) with
  // c = attn_logit_softcapping before the softmax, and the logits the same with final_logit_softcapping.
  float attn_logit_softcapping = 0;
  float final_logit_softcapping = 0;
  // Mixture of experts (num_experts 0: a dense MLP in every layer). A sparse layer's MLP is
  // num_experts MLPs of moe_intermediate_size each and a router [num_experts, H]: a softmax over
  // every expert, then the experts_per_token most probable ones (ties: the lower index), weighted by
  // their probabilities, renormalized to sum to 1 when moe_renormalize; plus, when
  // shared_expert_intermediate_size > 0, a shared MLP scaled by sigmoid(its gate [1, H] . x).
  int num_experts = 0, experts_per_token = 0, moe_intermediate_size = 0, shared_expert_intermediate_size = 0;
  bool moe_renormalize = false;
  std::vector<bool> dense_layers;  // [num_layers] when some layers keep a dense MLP (mlp_only_layers, decoder_sparse_step)
  bool layer_is_moe(int layer) const {
    return num_experts > 0 && (dense_layers.empty() || !dense_layers[size_t(layer)]);
  }
  std::vector<int> bos_token_ids;
  std::vector<int> eos_token_ids;
  // config.json's pad_token_id, kept to be written back (transformers' defaults for it can lie
  // outside a small vocabulary: Phi-3's 32000); it does not change the forward pass.
  std::optional<int64_t> pad_token_id;
  std::string torch_dtype = "float32";
  // Set when the checkpoint was stored quantized (config.json quantization_config); its linears were
  // dequantized at load or kept quantized (LoadOptions::keep_quantized, engine/model/
  // quantized_checkpoint.h). Not written by to_hf_json: what llmctl writes from a loaded checkpoint
  // is dense.
  std::optional<quant::QuantConfigInfo> source_quantization;

  // Checks every value is in range (ConfigLimits, kMaxVocabSize; floats finite and positive) and
  // consistent (GQA ratio, even head_dim, token ids in the vocabulary); throws InputError giving
  // the numbers.
  void validate() const;
  // The attention window of layer `layer` (0: the whole context).
  int layer_window(int layer) const {
    if (sliding_window <= 0) return 0;
    return sliding_layers.empty() || sliding_layers[size_t(layer)] ? sliding_window : 0;
  }
  // What attention scores are multiplied by: query_pre_attn_scalar^-1/2 or head_dim^-1/2 (YaRN's and
  // LongRoPE's attention factor is rope's: RopeParams::attention_scaling).
  float softmax_scale() const;
  nlohmann::json to_hf_json() const;  // config.json as transformers writes it
};

// Parses an HF config.json object. Throws InputError for unknown architectures or missing fields.
ModelConfig parse_hf_config(const nlohmann::json& j);

}  // namespace llmctl
