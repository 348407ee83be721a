#include "engine/model/config_fields.h"

#include <set>
#include <string_view>
#include <vector>

#include "engine/core/error.h"

namespace llmctl {

namespace {

// Read by parse_hf_config (or by the loaders: quantization_config) for the Llama, Mistral, Qwen2,
// Qwen3, Phi-3 and Gemma 3 architectures.
const std::set<std::string_view> kRead = {
    "architectures", "model_type", "hidden_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "intermediate_size", "vocab_size", "max_position_embeddings",
    "rms_norm_eps", "rope_theta", "rope_scaling", "rope_parameters", "tie_word_embeddings", "attention_bias",
    "hidden_act", "mlp_bias", "use_sliding_window", "sliding_window", "max_window_layers", "layer_types",
    "bos_token_id", "eos_token_id", "torch_dtype", "dtype", "quantization_config", "rope_interleaved",
    "hidden_activation", "query_pre_attn_scalar", "final_logit_softcapping", "attn_logit_softcapping",
    "use_bidirectional_attention", "sliding_window_pattern", "rope_local_base_freq", "partial_rotary_factor",
    "original_max_position_embeddings", "pad_token_id"};

// Known not to change a forward pass: what transformers' PretrainedConfig (4.x and 5.x) and these
// architectures' configs write besides the math (training, outputs, generation defaults, labels,
// tokenizer and remote-code hints), and pretraining_tp (transformers' sliced MLP computes the same
// product).
const std::set<std::string_view> kInert = {
    "transformers_version", "initializer_range", "use_cache", "attention_dropout", "pretraining_tp",
    "sep_token_id", "decoder_start_token_id", "return_dict", "output_hidden_states",
    "output_attentions", "torchscript", "use_bfloat16", "tf_legacy_loss", "pruned_heads",
    "chunk_size_feed_forward", "is_encoder_decoder", "is_decoder", "cross_attention_hidden_size",
    "add_cross_attention", "tie_encoder_decoder", "max_length", "min_length", "do_sample", "early_stopping",
    "num_beams", "num_beam_groups", "diversity_penalty", "temperature", "top_k", "top_p", "typical_p",
    "repetition_penalty", "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size",
    "bad_words_ids", "num_return_sequences", "output_scores", "return_dict_in_generate", "forced_bos_token_id",
    "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty", "suppress_tokens",
    "begin_suppress_tokens", "finetuning_task", "id2label", "label2id", "tokenizer_class", "prefix",
    "task_specific_params", "problem_type", "auto_map", "gradient_checkpointing", "use_return_dict",
    "embedding_dropout", "hidden_dropout", "residual_dropout", "unsloth_version", "unsloth_fixed",
    "is_llama_config", "transformers.js_config", "cache_implementation", "resid_pdrop", "embd_pdrop"};

// Mixture-of-experts architectures only (read by engine/model/moe/moe_config.cpp); the router's
// training losses and noise do not change a forward pass.
const std::set<std::string_view> kMoeRead = {"num_experts", "num_local_experts", "num_experts_per_tok",
                                             "moe_intermediate_size", "shared_expert_intermediate_size",
                                             "norm_topk_prob", "decoder_sparse_step", "mlp_only_layers", "qkv_bias"};
const std::set<std::string_view> kMoeInert = {"output_router_logits", "router_aux_loss_coef", "router_jitter_noise"};

}  // namespace

int get_int(const nlohmann::json& j, const char* key) {
  LLM_REQUIRE(j.contains(key) && !j[key].is_null()) << "config.json: missing field '" << key << "'";
  const nlohmann::json& v = j[key];
  LLM_REQUIRE(v.is_number_integer()) << "config.json: field '" << key << "' must be an integer, got " << v.dump();
  int64_t x = v.get<int64_t>();
  LLM_REQUIRE(x >= INT32_MIN && x <= INT32_MAX) << "config.json: field '" << key << "' = " << x << " is out of range";
  return int(x);
}

int get_int_or(const nlohmann::json& j, const char* key, int def) {
  return j.contains(key) && !j[key].is_null() ? get_int(j, key) : def;
}

float get_float_or(const nlohmann::json& j, const char* key, float def) {
  if (!j.contains(key) || j[key].is_null()) return def;
  LLM_REQUIRE(j[key].is_number()) << "config.json: field '" << key << "' must be a number, got " << j[key].dump();
  return j[key].get<float>();
}

bool get_bool_or(const nlohmann::json& j, const char* key, bool def) {
  if (!j.contains(key) || j[key].is_null()) return def;
  LLM_REQUIRE(j[key].is_boolean()) << "config.json: field '" << key << "' must be true or false";
  return j[key].get<bool>();
}

void refuse_unknown_config_fields(const nlohmann::json& j, const std::string& architecture, bool moe) {
  if (!j.is_object()) return;
  std::vector<std::string> unknown;
  for (const auto& [key, v] : j.items())
    if (!key.starts_with("_") && !kRead.count(key) && !kInert.count(key) && !(moe && (kMoeRead.count(key) || kMoeInert.count(key))))
      unknown.push_back(key);
  if (unknown.empty()) return;
  std::string list;
  for (size_t i = 0; i < unknown.size() && i < 8; ++i) list += (i ? ", " : "") + ("'" + unknown[i].substr(0, 80) + "'");
  if (unknown.size() > 8) list += " and " + std::to_string(unknown.size() - 8) + " more";
  LLM_THROW() << "config.json: field" << (unknown.size() > 1 ? "s " : " ") << list << " of this " << architecture
              << " checkpoint " << (unknown.size() > 1 ? "are" : "is")
              << " not known to llmctl; it may change the model's output, so the model is refused rather than run "
                 "without it";
}

}  // namespace llmctl
