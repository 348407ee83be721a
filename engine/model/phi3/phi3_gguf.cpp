#include "engine/model/phi3/phi3_gguf.h"

#include <cmath>

#include "engine/core/error.h"
#include "engine/model/gguf.h"

namespace llmctl {

namespace {

std::vector<float> rope_factors(const GgufFile& g, const GgufTensorInfo& t, int rotary_dim) {
  Tensor f = g.load(t);
  LLM_REQUIRE(f.numel() == rotary_dim / 2) << g.path() << ": " << t.name << " has " << f.numel()
                                           << " entries, expected " << rotary_dim / 2;
  return std::vector<float>(f.ptr<float>(), f.ptr<float>() + f.numel());
}

}  // namespace

void phi3_gguf_config(const GgufFile& g, ModelConfig& c) {
  const std::string a = "phi3.";
  // The converter writes no key length: a rope dimension count below hidden / heads is partial
  // rotary (Phi-4-mini), not the head size.
  const GgufValue* key_length = g.find(a + "attention.key_length");
  LLM_REQUIRE(!key_length || (key_length->as_int() > 0 && key_length->as_int() <= ConfigLimits::kMaxHeadDim))
      << g.path() << ": " << a << "attention.key_length is out of range";
  c.head_dim = key_length ? int(key_length->as_int()) : c.num_heads > 0 ? c.hidden_size / c.num_heads : 0;
  if (const GgufValue* dims = g.find(a + "rope.dimension_count"); dims && dims->as_int() != c.head_dim) {
    LLM_REQUIRE(dims->as_int() > 0 && dims->as_int() < c.head_dim)
        << g.path() << ": " << a << "rope.dimension_count " << dims->as_int() << " for heads of " << c.head_dim;
    c.rotary_dim = int(dims->as_int());
  } else {
    c.rotary_dim = 0;
  }
  if (const GgufValue* window = g.find(a + "attention.sliding_window"); window && window->as_int() > 0) {
    LLM_REQUIRE(window->as_int() <= ConfigLimits::kMaxPositions)
        << g.path() << ": " << a << "attention.sliding_window " << window->as_int() << " is out of range";
    c.sliding_window = int(window->as_int());  // every layer
  }
  const GgufTensorInfo* longf = g.find_tensor("rope_factors_long.weight");
  const GgufTensorInfo* shortf = g.find_tensor("rope_factors_short.weight");
  LLM_REQUIRE(!longf == !shortf) << g.path() << ": one of rope_factors_long / rope_factors_short without the other";
  if (!longf) return;
  RopeScaling& r = c.rope_scaling;
  LLM_REQUIRE(r.type == "none") << g.path() << ": LongRoPE factors beside rope scaling '" << r.type << "'";
  r.type = "longrope";
  r.long_factor = rope_factors(g, *longf, c.rotary());
  r.short_factor = rope_factors(g, *shortf, c.rotary());
  const GgufValue* orig = g.find(a + "rope.scaling.original_context_length");
  LLM_REQUIRE(orig && orig->as_int() > 0 && orig->as_int() <= ConfigLimits::kMaxPositions)
      << g.path() << ": LongRoPE factors without a valid " << a << "rope.scaling.original_context_length";
  r.original_max_position_embeddings = int(orig->as_int());
  r.factor = float(c.max_position_embeddings) / float(r.original_max_position_embeddings);
  const GgufValue* attn = g.find(a + "rope.scaling.attn_factor");
  r.attention_factor = attn ? float(attn->as_float())
                            : r.factor <= 1 ? 1.0f
                                            : float(std::sqrt(1.0 + std::log(double(r.factor)) /
                                                                        std::log(double(r.original_max_position_embeddings))));
}

const char* phi3_gguf_layer_name(const std::string& part) {
  if (part == "attn_qkv") return "self_attn.qkv_proj";
  if (part == "ffn_up") return "mlp.gate_up_proj";  // gate rows then up rows, as the HF tensor
  return nullptr;
}

}  // namespace llmctl
