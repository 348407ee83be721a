#include "engine/model/moe/moe_gguf.h"

#include "engine/core/error.h"

namespace llmctl {

namespace {
int key_int(const GgufFile& g, const std::string& key, int def) {
  const GgufValue* v = g.find(key);
  if (!v) return def;
  int64_t x = 0;
  try {
    x = v->as_int();
  } catch (const InputError&) {
    LLM_THROW() << g.path() << ": metadata '" << key << "' is not an integer";
  }
  LLM_REQUIRE(x >= 0 && x <= INT32_MAX) << g.path() << ": metadata '" << key << "' = " << x << " is out of range";
  return int(x);
}

std::string arch_of(const GgufFile& g) { return g.at("general.architecture").as_string(); }
}  // namespace

bool gguf_llama_is_mixtral(const GgufFile& g) { return key_int(g, "llama.expert_count", 0) > 0; }

void moe_gguf_config(const GgufFile& g, ModelConfig& c) {
  const std::string arch = arch_of(g), a = arch + ".";
  c.num_experts = key_int(g, a + "expert_count", 0);
  LLM_REQUIRE(c.num_experts > 0) << g.path() << ": a " << arch << " file without " << a << "expert_count";
  c.experts_per_token = key_int(g, a + "expert_used_count", 0);
  c.moe_intermediate_size = key_int(g, a + "expert_feed_forward_length", c.intermediate_size);
  c.shared_expert_intermediate_size = key_int(g, a + "expert_shared_feed_forward_length", 0);
  // llama.cpp's own choice per architecture (its converter writes no norm_topk_prob for these)
  c.moe_renormalize = arch != "qwen2moe";
  std::vector<bool> dense(size_t(c.num_layers), false);
  bool any = false;
  for (int l = 0; l < c.num_layers; ++l)
    if (!g.find_tensor("blk." + std::to_string(l) + ".ffn_gate_inp.weight")) any = dense[size_t(l)] = true;
  if (any) c.dense_layers = std::move(dense);
}

const char* qwen_moe_gguf_layer_name(const std::string& part) {
  if (part == "ffn_gate_inp") return "mlp.gate";
  if (part == "ffn_gate_shexp") return "mlp.shared_expert.gate_proj";
  if (part == "ffn_up_shexp") return "mlp.shared_expert.up_proj";
  if (part == "ffn_down_shexp") return "mlp.shared_expert.down_proj";
  if (part == "ffn_gate_inp_shexp") return "mlp.shared_expert_gate";
  return nullptr;
}

const char* mixtral_gguf_layer_name(const std::string& part) {
  if (part == "ffn_gate_inp") return "block_sparse_moe.gate";
  return nullptr;
}

namespace {
std::string expert_name(bool mixtral, const std::string& part, int layer, int expert) {
  const char* proj = part == "ffn_gate_exps" ? (mixtral ? "w1" : "gate_proj")
                     : part == "ffn_up_exps" ? (mixtral ? "w3" : "up_proj")
                     : part == "ffn_down_exps" ? (mixtral ? "w2" : "down_proj")
                                               : nullptr;
  if (!proj) return "";
  return "model.layers." + std::to_string(layer) + "." + (mixtral ? "block_sparse_moe." : "mlp.") + "experts." +
         std::to_string(expert) + "." + proj + ".weight";
}
}  // namespace

std::string qwen_moe_gguf_expert_name(const std::string& part, int layer, int expert) {
  return expert_name(false, part, layer, expert);
}

std::string mixtral_gguf_expert_name(const std::string& part, int layer, int expert) {
  return expert_name(true, part, layer, expert);
}

}  // namespace llmctl
