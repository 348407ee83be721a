#include "engine/model/gemma/gemma_gguf.h"

#include <cmath>

#include "engine/core/error.h"

namespace llmctl {

namespace {

// GeGLU and the attention scale (llama.cpp: 1/sqrt(head_dim), but hidden / heads for the largest
// model of each generation, `large_layers` deep, as Gemma's own code).
void gemma_common(ModelConfig& c, int large_layers) {
  c.hidden_act = "gelu_pytorch_tanh";
  c.query_pre_attn_scalar = c.num_layers == large_layers ? float(c.hidden_size / c.num_heads) : float(c.head_dim);
}

// <arch>.attention.sliding_window, and which layers slide: the per-layer flags of
// attention.sliding_window_pattern when it is an array, else layer l slides unless
// (l + 1) % n == 0 with n the pattern's value or `default_pattern`. False: no window.
bool gemma_sliding_layers(const GgufFile& g, const std::string& a, int default_pattern, ModelConfig& c) {
  const GgufValue* window = g.find(a + "attention.sliding_window");
  if (!window || window->as_int() <= 0) return false;  // no sliding layers
  LLM_REQUIRE(window->as_int() <= ConfigLimits::kMaxPositions)
      << g.path() << ": " << a << "attention.sliding_window " << window->as_int() << " is out of range";
  c.sliding_window = int(window->as_int());
  c.sliding_layers.assign(size_t(c.num_layers), false);
  const GgufValue* pattern = g.find(a + "attention.sliding_window_pattern");
  if (pattern && pattern->is_array()) {  // one flag per layer
    const GgufValue::Array& flags = pattern->as_array();
    LLM_REQUIRE(int64_t(flags.size()) == c.num_layers)
        << g.path() << ": " << a << "attention.sliding_window_pattern lists " << flags.size() << " layers, not "
        << c.num_layers;
    for (size_t l = 0; l < flags.size(); ++l) c.sliding_layers[l] = flags[l].as_bool();
  } else {
    const int64_t n = pattern ? pattern->as_int() : default_pattern;
    LLM_REQUIRE(n >= 0 && n <= c.num_layers + 1) << g.path() << ": sliding_window_pattern " << n << " is out of range";
    for (int l = 0; l < c.num_layers; ++l) c.sliding_layers[size_t(l)] = n == 0 || l % n < n - 1;
  }
  return true;
}

// <arch>.<key> as a soft-capping value (0 when absent).
float softcap_of(const GgufFile& g, const std::string& key) {
  const GgufValue* v = g.find(key);
  if (!v) return 0.0f;
  const double cap = v->as_float();
  LLM_REQUIRE(std::isfinite(cap) && cap >= 0 && cap < 1e6) << g.path() << ": " << key << " " << cap
                                                            << " is out of range";
  return float(cap);
}

}  // namespace

void gemma2_gguf_config(const GgufFile& g, ModelConfig& c) {
  const std::string a = "gemma2.";
  gemma_common(c, /*large_layers=*/46);  // Gemma 2 27B
  c.attn_logit_softcapping = softcap_of(g, a + "attn_logit_softcapping");
  c.final_logit_softcapping = softcap_of(g, a + "final_logit_softcapping");
  gemma_sliding_layers(g, a, /*default_pattern=*/2, c);
}

void gemma3_gguf_config(const GgufFile& g, ModelConfig& c) {
  const std::string a = "gemma3.";
  gemma_common(c, /*large_layers=*/62);  // Gemma 3 27B
  LLM_REQUIRE(softcap_of(g, a + "final_logit_softcapping") == 0.0f)
      << g.path() << ": final logit soft-capping in a gemma3 file is not supported (llama.cpp ignores it there)";
  if (!gemma_sliding_layers(g, a, /*default_pattern=*/6, c)) return;
  const GgufValue* base = g.find(a + "rope.freq_base_swa");
  c.sliding_rope_theta = base ? float(base->as_float()) : 10000.0f;
  LLM_REQUIRE(std::isfinite(c.sliding_rope_theta) && c.sliding_rope_theta > 0)
      << g.path() << ": " << a << "rope.freq_base_swa must be positive, got " << c.sliding_rope_theta;
}

const char* gemma_gguf_layer_name(const std::string& part) {
  if (part == "post_attention_norm") return "post_attention_layernorm";
  if (part == "ffn_norm") return "pre_feedforward_layernorm";
  if (part == "post_ffw_norm") return "post_feedforward_layernorm";
  return nullptr;
}

}  // namespace llmctl
