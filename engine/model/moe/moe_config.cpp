#include "engine/model/moe/moe_config.h"

#include "engine/core/error.h"
#include "engine/model/config_fields.h"

namespace llmctl {

namespace {
constexpr int kMaxExperts = 1024;
}  // namespace

void qwen_moe_hf_config(const nlohmann::json& j, ModelConfig& c) {
  c.num_experts = get_int_or(j, "num_experts", get_int_or(j, "num_local_experts", 0));
  LLM_REQUIRE(c.num_experts > 0) << "config.json: " << c.architecture << " needs num_experts";
  c.experts_per_token = get_int(j, "num_experts_per_tok");
  c.moe_intermediate_size = get_int(j, "moe_intermediate_size");
  c.moe_renormalize = get_bool_or(j, "norm_topk_prob", false);
  c.shared_expert_intermediate_size = get_int_or(j, "shared_expert_intermediate_size", 0);
  if (c.architecture == "Qwen2MoeForCausalLM") c.attention_bias = get_bool_or(j, "qkv_bias", true);
  // Layer l keeps a dense MLP when listed in mlp_only_layers or when (l + 1) % decoder_sparse_step != 0.
  const int step = get_int_or(j, "decoder_sparse_step", 1);
  LLM_REQUIRE(step >= 1) << "config.json: decoder_sparse_step must be at least 1, got " << step;
  std::vector<bool> dense(size_t(std::max(c.num_layers, 0)), false);
  bool any = false;
  for (int l = 0; l < c.num_layers; ++l) any |= dense[size_t(l)] = (l + 1) % step != 0;
  if (j.contains("mlp_only_layers") && !j["mlp_only_layers"].is_null()) {
    const auto& v = j["mlp_only_layers"];
    LLM_REQUIRE(v.is_array()) << "config.json: mlp_only_layers must be a list of layer indices";
    for (const auto& x : v) {
      LLM_REQUIRE(x.is_number_integer() && x.get<int64_t>() >= 0 && x.get<int64_t>() < c.num_layers)
          << "config.json: mlp_only_layers lists " << x.dump() << ", not a layer of the " << c.num_layers;
      dense[size_t(x.get<int64_t>())] = any = true;
    }
  }
  if (any) c.dense_layers = std::move(dense);
}

void mixtral_hf_config(const nlohmann::json& j, ModelConfig& c) {
  c.num_experts = get_int(j, "num_local_experts");
  c.experts_per_token = get_int(j, "num_experts_per_tok");
  c.moe_intermediate_size = c.intermediate_size;
  c.moe_renormalize = true;
}

void validate_moe(const ModelConfig& c) {
  LLM_REQUIRE(c.num_experts >= 1 && c.num_experts <= kMaxExperts)
      << "model config: num_experts = " << c.num_experts << " is outside [1, " << kMaxExperts << "]";
  LLM_REQUIRE(c.experts_per_token >= 1 && c.experts_per_token <= c.num_experts)
      << "model config: num_experts_per_tok = " << c.experts_per_token << " must be in [1, num_experts = "
      << c.num_experts << "]";
  LLM_REQUIRE(c.moe_intermediate_size >= 1 && c.moe_intermediate_size <= ConfigLimits::kMaxIntermediate)
      << "model config: moe_intermediate_size = " << c.moe_intermediate_size << " is out of range";
  LLM_REQUIRE(c.shared_expert_intermediate_size >= 0 &&
              c.shared_expert_intermediate_size <= ConfigLimits::kMaxIntermediate)
      << "model config: shared_expert_intermediate_size = " << c.shared_expert_intermediate_size << " is out of range";
  LLM_REQUIRE(c.dense_layers.empty() || int(c.dense_layers.size()) == c.num_layers)
      << "model config: dense_layers must list every layer";
}

void moe_hf_json(const ModelConfig& c, nlohmann::json& j) {
  j["num_experts_per_tok"] = c.experts_per_token;
  if (c.architecture == "MixtralForCausalLM") {
    j["num_local_experts"] = c.num_experts;
    return;
  }
  j["num_experts"] = c.num_experts;
  j["moe_intermediate_size"] = c.moe_intermediate_size;
  j["norm_topk_prob"] = c.moe_renormalize;
  if (c.shared_expert_intermediate_size > 0) j["shared_expert_intermediate_size"] = c.shared_expert_intermediate_size;
  if (c.architecture == "Qwen2MoeForCausalLM") j["qkv_bias"] = c.attention_bias;
  nlohmann::json dense = nlohmann::json::array();
  for (int l = 0; l < int(c.dense_layers.size()); ++l)
    if (c.dense_layers[size_t(l)]) dense.push_back(l);
  j["mlp_only_layers"] = dense;
  j["decoder_sparse_step"] = 1;
}

}  // namespace llmctl
