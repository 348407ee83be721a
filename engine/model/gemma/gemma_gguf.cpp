#include "engine/model/gemma/gemma_gguf.h"

#include <cmath>

#include "engine/core/error.h"

namespace llmctl {

void gemma3_gguf_config(const GgufFile& g, ModelConfig& c) {
  const std::string a = "gemma3.";
  c.hidden_act = "gelu_pytorch_tanh";
  const GgufValue* cap = g.find(a + "final_logit_softcapping");
  LLM_REQUIRE(!cap || cap->as_float() == 0.0)
      << g.path() << ": final logit soft-capping is not supported (llmctl does not soft-cap logits yet)";
  // llama.cpp: 1/sqrt(head_dim), but hidden / heads for the 62-layer (27B) model, as Gemma's own code.
  c.query_pre_attn_scalar = c.num_layers == 62 ? float(c.hidden_size / c.num_heads) : float(c.head_dim);
  const GgufValue* window = g.find(a + "attention.sliding_window");
  if (!window || window->as_int() <= 0) return;  // no sliding layers
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
  } else {  // every n-th layer global (llama.cpp's default for gemma3: 6)
    const int64_t n = pattern ? pattern->as_int() : 6;
    LLM_REQUIRE(n >= 0 && n <= c.num_layers + 1) << g.path() << ": sliding_window_pattern " << n << " is out of range";
    for (int l = 0; l < c.num_layers; ++l) c.sliding_layers[size_t(l)] = n == 0 || l % n < n - 1;
  }
  const GgufValue* base = g.find(a + "rope.freq_base_swa");
  c.sliding_rope_theta = base ? float(base->as_float()) : 10000.0f;
  LLM_REQUIRE(std::isfinite(c.sliding_rope_theta) && c.sliding_rope_theta > 0)
      << g.path() << ": " << a << "rope.freq_base_swa must be positive, got " << c.sliding_rope_theta;
}

const char* gemma3_gguf_layer_name(const std::string& part) {
  if (part == "post_attention_norm") return "post_attention_layernorm";
  if (part == "ffn_norm") return "pre_feedforward_layernorm";
  if (part == "post_ffw_norm") return "post_feedforward_layernorm";
  return nullptr;
}

}  // namespace llmctl
