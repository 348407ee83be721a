#include "engine/model/random_checkpoint.h"

#include <random>

namespace llmctl {

std::vector<LlamaTensorSpec> llama_tensor_specs(const ModelConfig& c) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, q = int64_t(c.num_heads) * c.head_dim,
                kv = int64_t(c.num_kv_heads) * c.head_dim;
  std::vector<LlamaTensorSpec> s = {{"model.embed_tokens.weight", {c.vocab_size, H}}, {"model.norm.weight", {H}, true}};
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    s.push_back({p + "input_layernorm.weight", {H}, true});
    s.push_back({p + "post_attention_layernorm.weight", {H}, true});
    s.push_back({p + "self_attn.q_proj.weight", {q, H}});
    s.push_back({p + "self_attn.k_proj.weight", {kv, H}});
    s.push_back({p + "self_attn.v_proj.weight", {kv, H}});
    s.push_back({p + "self_attn.o_proj.weight", {H, q}});
    s.push_back({p + "mlp.gate_proj.weight", {I, H}});
    s.push_back({p + "mlp.up_proj.weight", {I, H}});
    s.push_back({p + "mlp.down_proj.weight", {H, I}});
  }
  if (!c.tie_word_embeddings) s.push_back({"lm_head.weight", {c.vocab_size, H}});
  return s;
}

Checkpoint random_checkpoint(const ModelConfig& c, uint32_t seed, float stddev) {
  Checkpoint ck;
  ck.config = c;
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, stddev);
  for (const LlamaTensorSpec& spec : llama_tensor_specs(c)) {
    Tensor t = Tensor::empty_host(DType::F32, spec.shape);
    const float base = spec.norm ? 1.0f : 0.0f;
    for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = base + d(rng);
    ck.tensors[spec.name] = t;
  }
  return ck;
}

}  // namespace llmctl
