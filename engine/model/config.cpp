#include "engine/model/config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

#include "engine/core/error.h"
#include "engine/model/config_fields.h"
#include "engine/model/moe/moe_config.h"
#include "engine/model/registry.h"

namespace llmctl {

using nlohmann::json;

namespace {

// bos_token_id / eos_token_id: an int, a list of ints, or null.
std::vector<int> get_ids(const json& j, const char* key) {
  std::vector<int> out;
  if (!j.contains(key) || j[key].is_null()) return out;
  const json& v = j[key];
  auto one = [&](const json& x) {
    LLM_REQUIRE(x.is_number_integer()) << "config.json: '" << key << "' must be an integer or a list of integers";
    const int64_t id = x.get<int64_t>();
    LLM_REQUIRE(id >= 0 && id < kMaxVocabSize) << "config.json: '" << key << "' " << id << " is not a token id";
    out.push_back(int(id));
  };
  if (v.is_array()) {
    LLM_REQUIRE(v.size() <= 1024) << "config.json: '" << key << "' lists " << v.size() << " ids";
    for (const json& x : v) one(x);
  }
  else
    one(v);
  return out;
}

// One rope description: transformers 5's `rope_parameters` {rope_type, rope_theta, factor, ...} or
// the older `rope_scaling` {rope_type | type, factor, ...} (rope_theta then a top-level field).
RopeScaling parse_rope_object(const json& s, const char* field) {
  RopeScaling r;
  LLM_REQUIRE(s.is_object()) << "config.json: " << field << " must be an object";
  std::string type;
  if (s.contains("rope_type") && s["rope_type"].is_string())
    type = s["rope_type"].get<std::string>();
  else if (s.contains("type") && s["type"].is_string())
    type = s["type"].get<std::string>();
  else if (!s.contains("rope_type") && !s.contains("type") && std::string(field) == "rope_parameters")
    type = "default";  // rope_parameters holding only rope_theta
  // Phi-3's early spellings of LongRoPE (transformers' Phi3Config renames both).
  if (type == "su" || (type == "yarn" && s.contains("long_factor"))) type = "longrope";
  LLM_REQUIRE(type == "default" || type == "linear" || type == "llama3" || type == "yarn" || type == "longrope")
      << "config.json: " << field << " type '" << type << "' is not supported (default, linear, llama3, yarn, longrope)";
  for (const auto& [key, v] : s.items())  // a field llmctl does not read would change the math unseen
    LLM_REQUIRE(key == "rope_type" || key == "type" || key == "rope_theta" || key == "partial_rotary_factor" ||
                (type != "default" && key == "factor") ||
                (type == "llama3" && (key == "low_freq_factor" || key == "high_freq_factor" ||
                                      key == "original_max_position_embeddings")) ||
                (type == "yarn" && (key == "original_max_position_embeddings" || key == "attention_factor" ||
                                    key == "beta_fast" || key == "beta_slow" || key == "mscale" ||
                                    key == "mscale_all_dim" || key == "truncate")) ||
                (type == "longrope" && (key == "original_max_position_embeddings" || key == "attention_factor" ||
                                        key == "short_factor" || key == "long_factor")))
        << "config.json: " << field << " field '" << key << "' is not supported with rope type '" << type << "'";
  if (type == "default") return r;
  r.type = type;
  r.factor = get_float_or(s, "factor", 1.0f);
  if (type == "longrope") {
    const auto factors = [&](const char* key) {
      LLM_REQUIRE(s.contains(key) && s[key].is_array()) << "config.json: " << field << ": longrope needs " << key;
      std::vector<float> f;
      for (const json& v : s[key]) {
        LLM_REQUIRE(v.is_number() && f.size() < 4096) << "config.json: " << field << "." << key << " must be numbers";
        f.push_back(v.get<float>());
      }
      return f;
    };
    r.short_factor = factors("short_factor");
    r.long_factor = factors("long_factor");
    // 0: not given here (config.json's top-level field, or max_position_embeddings / original, later)
    r.factor = s.contains("factor") && s["factor"].is_number() ? s["factor"].get<float>() : 0.0f;
    r.original_max_position_embeddings = get_int_or(s, "original_max_position_embeddings", 0);
    r.attention_factor = s.contains("attention_factor") && s["attention_factor"].is_number()
                             ? s["attention_factor"].get<float>()
                             : 0.0f;  // 0: derived from the factor once it is known
  }
  if (type == "yarn") {
    LLM_REQUIRE(s.contains("factor") && s["factor"].is_number())
        << "config.json: " << field << ": yarn needs a factor (llmctl does not derive it from max_position_embeddings)";
    r.original_max_position_embeddings = get_int(s, "original_max_position_embeddings");
    // transformers reads these with `or`: a null or 0 takes the default.
    const auto num_or = [&](const char* key, float def) {
      return s.contains(key) && s[key].is_number() && s[key].get<double>() != 0 ? s[key].get<float>() : def;
    };
    r.beta_fast = num_or("beta_fast", 32.0f);
    r.beta_slow = num_or("beta_slow", 1.0f);
    if (s.contains("truncate") && !s["truncate"].is_null()) {
      LLM_REQUIRE(s["truncate"].is_boolean()) << "config.json: " << field << ".truncate must be true or false";
      r.truncate = s["truncate"].get<bool>();
    }
    const auto get_mscale = [](double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
    if (s.contains("attention_factor") && !s["attention_factor"].is_null()) {
      r.attention_factor = get_float_or(s, "attention_factor", 1.0f);
    } else {
      const double mscale = num_or("mscale", 0), mscale_all_dim = num_or("mscale_all_dim", 0);
      r.attention_factor = float(mscale != 0 && mscale_all_dim != 0
                                     ? get_mscale(r.factor, mscale) / get_mscale(r.factor, mscale_all_dim)
                                     : get_mscale(r.factor, 1.0));
    }
  }
  if (type == "llama3") {
    r.low_freq_factor = get_float_or(s, "low_freq_factor", 1.0f);
    r.high_freq_factor = get_float_or(s, "high_freq_factor", 4.0f);
    r.original_max_position_embeddings = get_int(s, "original_max_position_embeddings");
  }
  return r;
}

// partial_rotary_factor: top level (transformers 4.x) or in the rope description (5.x, per layer
// type too); every place that gives it must agree. rotary_dim = int(head_dim * factor), as
// transformers computes it.
void parse_partial_rotary(const json& j, ModelConfig& c) {
  std::vector<const json*> places = {&j};
  for (const char* key : {"rope_parameters", "rope_scaling"})
    if (j.contains(key) && j[key].is_object()) {
      places.push_back(&j[key]);
      for (const char* type : {"full_attention", "sliding_attention"})
        if (j[key].contains(type) && j[key][type].is_object()) places.push_back(&j[key][type]);
    }
  std::optional<double> factor;
  for (const json* p : places) {
    if (!p->contains("partial_rotary_factor") || (*p)["partial_rotary_factor"].is_null()) continue;
    LLM_REQUIRE((*p)["partial_rotary_factor"].is_number()) << "config.json: partial_rotary_factor must be a number";
    const double f = (*p)["partial_rotary_factor"].get<double>();
    LLM_REQUIRE(!factor || *factor == f) << "config.json: partial_rotary_factor " << f << " and " << *factor << " disagree";
    factor = f;
  }
  if (!factor || *factor == 1.0) return;
  LLM_REQUIRE(std::isfinite(*factor) && *factor > 0 && *factor < 1)
      << "config.json: partial_rotary_factor must be in (0, 1], got " << *factor;
  // int() as transformers; the nudge keeps a factor written as rotary / head_dim exact on re-reading
  c.rotary_dim = int(double(c.head_dim) * *factor + 1e-9);
  LLM_REQUIRE(c.rotary_dim >= 2) << "config.json: partial_rotary_factor " << *factor << " leaves no rotary dimension";
}

// rope_theta and the scaling, in either spelling. Both spellings at once must agree.
void parse_rope(const json& j, ModelConfig& c) {
  const bool old_scaling = j.contains("rope_scaling") && !j["rope_scaling"].is_null();
  if (j.contains("rope_parameters") && !j["rope_parameters"].is_null()) {
    const json* pp = &j["rope_parameters"];
    LLM_REQUIRE(pp->is_object()) << "config.json: rope_parameters must be an object";
    if (pp->contains("full_attention") || pp->contains("sliding_attention")) {  // per layer type
      for (const auto& [key, v] : pp->items())
        LLM_REQUIRE(key == "full_attention" || key == "sliding_attention")
            << "config.json: rope_parameters per layer type has '" << key << "' (full_attention, sliding_attention)";
      LLM_REQUIRE(pp->contains("full_attention")) << "config.json: rope_parameters lacks full_attention";
      if (pp->contains("sliding_attention")) {
        const json& s = (*pp)["sliding_attention"];
        LLM_REQUIRE(parse_rope_object(s, "rope_parameters.sliding_attention").type == "none")
            << "config.json: scaled rope on sliding layers is not supported";
        c.sliding_rope_theta = get_float_or(s, "rope_theta", 0);
        LLM_REQUIRE(c.sliding_rope_theta > 0) << "config.json: rope_parameters.sliding_attention needs rope_theta";
      }
      pp = &(*pp)["full_attention"];
    }
    const json& p = *pp;
    c.rope_scaling = parse_rope_object(p, "rope_parameters");
    c.rope_theta = get_float_or(p, "rope_theta", get_float_or(j, "rope_theta", c.rope_theta));
    LLM_REQUIRE(!j.contains("rope_theta") || j["rope_theta"].is_null() || get_float_or(j, "rope_theta", 0) == c.rope_theta)
        << "config.json: rope_theta " << j["rope_theta"].dump() << " and rope_parameters.rope_theta " << c.rope_theta
        << " disagree";
    if (old_scaling) {
      const RopeScaling o = parse_rope_object(j["rope_scaling"], "rope_scaling");
      LLM_REQUIRE(o.type == c.rope_scaling.type && o.factor == c.rope_scaling.factor &&
                  o.low_freq_factor == c.rope_scaling.low_freq_factor &&
                  o.high_freq_factor == c.rope_scaling.high_freq_factor &&
                  o.original_max_position_embeddings == c.rope_scaling.original_max_position_embeddings &&
                  o.beta_fast == c.rope_scaling.beta_fast && o.beta_slow == c.rope_scaling.beta_slow &&
                  o.truncate == c.rope_scaling.truncate && o.attention_factor == c.rope_scaling.attention_factor &&
                  o.short_factor == c.rope_scaling.short_factor && o.long_factor == c.rope_scaling.long_factor)
          << "config.json: rope_scaling and rope_parameters disagree";
    }
    return;
  }
  c.rope_theta = get_float_or(j, "rope_theta", c.rope_theta);
  if (old_scaling) c.rope_scaling = parse_rope_object(j["rope_scaling"], "rope_scaling");
  c.sliding_rope_theta = get_float_or(j, "rope_local_base_freq", 0);  // Gemma 3 before transformers 5
}

// Which layers slide. transformers 5 lists each layer's kind (layer_types); before it, Qwen2 slid
// the layers from max_window_layers on, and Mistral every layer. `window` is the config's
// effective window (0: none); a sliding layer without one is refused, as transformers fails there.
void parse_sliding_layers(const json& j, const Architecture& info, int window, ModelConfig& c) {
  LLM_REQUIRE(window >= 0) << "model config: sliding_window must not be negative, got " << window;
  c.sliding_window = window;
  c.sliding_layers.clear();
  if (j.contains("layer_types") && !j["layer_types"].is_null()) {
    const json& t = j["layer_types"];
    LLM_REQUIRE(t.is_array() && int64_t(t.size()) == c.num_layers)
        << "config.json: layer_types must list one entry for each of the " << c.num_layers << " layers";
    bool any = false;
    for (const json& e : t) {
      LLM_REQUIRE(e == "full_attention" || e == "sliding_attention")
          << "config.json: layer type " << e.dump() << " is not supported (full_attention, sliding_attention)";
      c.sliding_layers.push_back(e == "sliding_attention");
      any |= c.sliding_layers.back();
    }
    LLM_REQUIRE(!any || window > 0) << "config.json: layer_types names sliding_attention layers but no sliding_window "
                                       "applies (sliding_window unset, or use_sliding_window false)";
  } else if (window > 0 && j.contains("sliding_window_pattern") && !j["sliding_window_pattern"].is_null()) {
    const int pattern = get_int(j, "sliding_window_pattern");  // Gemma 3 before transformers 5
    LLM_REQUIRE(pattern > 0) << "config.json: sliding_window_pattern must be positive, got " << pattern;
    for (int l = 0; l < c.num_layers; ++l) c.sliding_layers.push_back((l + 1) % pattern != 0);
  } else if (window > 0 && info.sliding_pattern > 0) {  // Gemma 2 before transformers 5: alternating
    for (int l = 0; l < c.num_layers; ++l) c.sliding_layers.push_back((l + 1) % info.sliding_pattern != 0);
  } else if (window > 0 && !info.sliding_window_by_default) {  // Qwen2 before transformers 5
    const int first = get_int_or(j, "max_window_layers", 28);
    for (int l = 0; l < c.num_layers; ++l) c.sliding_layers.push_back(l >= first);
  }
  bool any = false;
  for (bool b : c.sliding_layers) any |= b;
  if (window <= 0 || (!c.sliding_layers.empty() && !any)) {  // no layer slides
    c.sliding_window = 0;
    c.sliding_layers.clear();
  } else if (!c.sliding_layers.empty() && std::find(c.sliding_layers.begin(), c.sliding_layers.end(), false) ==
                                               c.sliding_layers.end()) {
    c.sliding_layers.clear();  // every layer slides
  }
}

// The double with the shortest decimal form that rounds to f: 1e-5f is written as 1e-05, not as
// 9.999999747378752e-06.
double shortest(float f) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf), f);
  return std::strtod(std::string(buf, r.ptr).c_str(), nullptr);
}

}  // namespace

ModelConfig parse_hf_config(const json& j) {
  LLM_REQUIRE(j.is_object()) << "config.json is not a JSON object";
  ModelConfig c;
  std::string arch;
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string())
    arch = j["architectures"][0].get<std::string>();
  LLM_REQUIRE(!arch.empty()) << "config.json: no 'architectures' entry";
  const Architecture* info = &find_architecture(arch);  // unknown architectures refused by name
  c.architecture = info->name;
  c.model_type = j.contains("model_type") && j["model_type"].is_string() ? j["model_type"].get<std::string>()
                                                                         : std::string(info->model_type);
  c.hidden_size = get_int(j, "hidden_size");
  c.num_layers = get_int(j, "num_hidden_layers");
  c.num_heads = get_int(j, "num_attention_heads");
  c.num_kv_heads = get_int_or(j, "num_key_value_heads", c.num_heads);
  c.head_dim = get_int_or(j, "head_dim", c.num_heads > 0 ? c.hidden_size / c.num_heads : 0);
  c.intermediate_size = get_int(j, "intermediate_size");
  c.vocab_size = get_int(j, "vocab_size");
  c.max_position_embeddings = get_int_or(j, "max_position_embeddings", c.max_position_embeddings);
  c.rms_norm_eps = get_float_or(j, "rms_norm_eps", c.rms_norm_eps);
  parse_rope(j, c);
  parse_partial_rotary(j, c);
  if (c.rope_scaling.type == "longrope") {  // what transformers derives from the rest of the config
    RopeScaling& r = c.rope_scaling;
    if (r.original_max_position_embeddings <= 0)
      r.original_max_position_embeddings = get_int_or(j, "original_max_position_embeddings", 0);
    LLM_REQUIRE(r.original_max_position_embeddings > 0)
        << "config.json: longrope needs original_max_position_embeddings";
    if (r.factor <= 0) r.factor = float(c.max_position_embeddings) / float(r.original_max_position_embeddings);
    if (r.attention_factor <= 0)
      r.attention_factor = r.factor <= 1 ? 1.0f
                                         : float(std::sqrt(1.0 + std::log(double(r.factor)) /
                                                                     std::log(double(r.original_max_position_embeddings))));
  }
  c.tie_word_embeddings = get_bool_or(j, "tie_word_embeddings", false);
  c.attention_bias = get_bool_or(j, "attention_bias", info->attention_bias);
  c.qk_norm = info->qk_norm;
  // Half-supported variants are refused by name rather than run without the part llmctl lacks.
  for (const char* key : {"hidden_act", "hidden_activation"}) {  // Gemma writes the second
    if (!j.contains(key) || j[key].is_null()) continue;
    LLM_REQUIRE(j[key] == "silu" || j[key] == "gelu_pytorch_tanh")
        << "config.json: " << key << " " << j[key].dump()
        << " is not supported (llmctl's gated MLP runs silu and gelu_pytorch_tanh)";
    c.hidden_act = j[key].get<std::string>();
  }
  c.query_pre_attn_scalar = get_float_or(j, "query_pre_attn_scalar", 0);
  c.attn_logit_softcapping = get_float_or(j, "attn_logit_softcapping", 0);  // null: none
  c.final_logit_softcapping = get_float_or(j, "final_logit_softcapping", 0);
  LLM_REQUIRE(!get_bool_or(j, "use_bidirectional_attention", false))
      << "config.json: use_bidirectional_attention is not supported (llmctl's attention is causal)";
  LLM_REQUIRE(!get_bool_or(j, "rope_interleaved", false))
      << "config.json: rope_interleaved (GPT-J style rotary pairs) is not supported (llmctl rotates the two halves)";
  LLM_REQUIRE(!get_bool_or(j, "mlp_bias", false)) << "config.json: mlp_bias is not supported (llmctl's MLP has no biases)";
  // Qwen2 writes a sliding_window that applies only with use_sliding_window (default false);
  // Mistral's applies whenever it is set (null: none).
  const int window =
      get_bool_or(j, "use_sliding_window", info->sliding_window_by_default) ? get_int_or(j, "sliding_window", 0) : 0;
  parse_sliding_layers(j, *info, window, c);
  if (info->hf_config) info->hf_config(j, c);  // a family's own fields (experts)
  refuse_unknown_config_fields(j, c.architecture, c.num_experts > 0);
  c.bos_token_ids = get_ids(j, "bos_token_id");
  c.eos_token_ids = get_ids(j, "eos_token_id");
  if (j.contains("pad_token_id") && j["pad_token_id"].is_number_integer()) c.pad_token_id = j["pad_token_id"].get<int64_t>();
  if (j.contains("torch_dtype") && j["torch_dtype"].is_string())
    c.torch_dtype = j["torch_dtype"].get<std::string>();
  else if (j.contains("dtype") && j["dtype"].is_string())
    c.torch_dtype = j["dtype"].get<std::string>();  // newer transformers
  c.validate();
  return c;
}

void ModelConfig::validate() const {
  auto in_range = [](int v, int max, const char* name) {
    LLM_REQUIRE(v > 0) << "model config: " << name << " must be positive, got " << v;
    LLM_REQUIRE(v <= max) << "model config: " << name << " = " << v << " is larger than llmctl's limit of " << max;
  };
  using L = ConfigLimits;
  in_range(hidden_size, L::kMaxHidden, "hidden_size");
  in_range(num_layers, L::kMaxLayers, "num_hidden_layers");
  in_range(num_heads, L::kMaxHeads, "num_attention_heads");
  in_range(num_kv_heads, L::kMaxHeads, "num_key_value_heads");
  in_range(head_dim, L::kMaxHeadDim, "head_dim");
  in_range(intermediate_size, L::kMaxIntermediate, "intermediate_size");
  in_range(vocab_size, kMaxVocabSize, "vocab_size");
  in_range(max_position_embeddings, L::kMaxPositions, "max_position_embeddings");
  if (num_experts > 0) validate_moe(*this);
  LLM_REQUIRE(sliding_window >= 0) << "model config: sliding_window must not be negative, got " << sliding_window;
  LLM_REQUIRE(hidden_act == "silu" || hidden_act == "gelu_pytorch_tanh")
      << "model config: hidden_act " << hidden_act << " is not supported (silu, gelu_pytorch_tanh)";
  LLM_REQUIRE(std::isfinite(query_pre_attn_scalar) && query_pre_attn_scalar >= 0)
      << "model config: query_pre_attn_scalar must be positive, got " << query_pre_attn_scalar;
  for (float cap : {attn_logit_softcapping, final_logit_softcapping})
    LLM_REQUIRE(std::isfinite(cap) && cap >= 0 && cap < 1e6f)
        << "model config: a logit soft-capping value must be in [0, 1e6) (0: none), got " << cap;
  LLM_REQUIRE(std::isfinite(sliding_rope_theta) && sliding_rope_theta >= 0)
      << "model config: the sliding layers' rope_theta must be positive, got " << sliding_rope_theta;
  LLM_REQUIRE(sliding_layers.empty() || int64_t(sliding_layers.size()) == num_layers)
      << "model config: " << sliding_layers.size() << " sliding-layer flags for " << num_layers << " layers";
  LLM_REQUIRE(num_heads % num_kv_heads == 0) << "model config: num_attention_heads (" << num_heads
                                             << ") is not a multiple of num_key_value_heads (" << num_kv_heads << ")";
  LLM_REQUIRE(head_dim % 2 == 0) << "model config: head_dim " << head_dim << " must be even for rotary embeddings";
  LLM_REQUIRE(rotary_dim >= 0 && rotary_dim <= head_dim && rotary_dim % 2 == 0)
      << "model config: rotary dimensions " << rotary_dim << " must be even and at most head_dim " << head_dim;
  LLM_REQUIRE(std::isfinite(rms_norm_eps) && rms_norm_eps > 0 && rms_norm_eps < 1)
      << "model config: rms_norm_eps must be in (0, 1), got " << rms_norm_eps;
  LLM_REQUIRE(std::isfinite(rope_theta) && rope_theta > 0) << "model config: rope_theta must be positive, got "
                                                          << rope_theta;
  LLM_REQUIRE(rope_scaling.type == "none" || rope_scaling.type == "linear" || rope_scaling.type == "llama3" ||
              rope_scaling.type == "yarn" || rope_scaling.type == "longrope" || rope_scaling.type == "freq_factors")
      << "model config: unknown rope scaling '" << rope_scaling.type << "'";
  if (rope_scaling.type == "freq_factors") {
    LLM_REQUIRE(int64_t(rope_scaling.freq_factors.size()) == rotary() / 2)
        << "model config: " << rope_scaling.freq_factors.size() << " rope frequency factors for head_dim " << head_dim;
    for (float f : rope_scaling.freq_factors)
      LLM_REQUIRE(std::isfinite(f) && f > 0) << "model config: a rope frequency factor of " << f;
  }
  if (rope_scaling.type != "none") {
    LLM_REQUIRE(std::isfinite(rope_scaling.factor) && rope_scaling.factor > 0)
        << "model config: rope scaling factor must be positive, got " << rope_scaling.factor;
  }
  const std::string& rope = rope_scaling.type;
  if (rope == "llama3" || rope == "yarn" || rope == "longrope")
    LLM_REQUIRE(rope_scaling.original_max_position_embeddings > 0 &&
                rope_scaling.original_max_position_embeddings <= L::kMaxPositions)
        << "model config: " << rope << " rope scaling needs original_max_position_embeddings in (0, "
        << L::kMaxPositions << "], got " << rope_scaling.original_max_position_embeddings;
  if (rope == "yarn" || rope == "longrope")
    LLM_REQUIRE(std::isfinite(rope_scaling.attention_factor) && rope_scaling.attention_factor > 0 &&
                rope_scaling.attention_factor < 100)
        << "model config: " << rope << " attention_factor must be in (0, 100), got " << rope_scaling.attention_factor;
  if (rope == "llama3")
    LLM_REQUIRE(std::isfinite(rope_scaling.low_freq_factor) && std::isfinite(rope_scaling.high_freq_factor) &&
                rope_scaling.low_freq_factor > 0 && rope_scaling.high_freq_factor > rope_scaling.low_freq_factor)
        << "model config: llama3 rope scaling needs 0 < low_freq_factor < high_freq_factor, got "
        << rope_scaling.low_freq_factor << " and " << rope_scaling.high_freq_factor;
  if (rope == "longrope")
    for (const std::vector<float>* f : {&rope_scaling.short_factor, &rope_scaling.long_factor}) {
      LLM_REQUIRE(int64_t(f->size()) == rotary() / 2)
          << "model config: longrope has " << f->size() << " factors for " << rotary() << " rotary dimensions (want "
          << rotary() / 2 << ")";
      for (float x : *f) LLM_REQUIRE(std::isfinite(x) && x > 0) << "model config: a longrope factor of " << x;
    }
  if (rope == "yarn")
    LLM_REQUIRE(std::isfinite(rope_scaling.beta_fast) && std::isfinite(rope_scaling.beta_slow) &&
                rope_scaling.beta_fast > 0 && rope_scaling.beta_slow > 0)
        << "model config: yarn rope scaling needs positive beta_fast and beta_slow, got " << rope_scaling.beta_fast
        << " and " << rope_scaling.beta_slow;
  for (int id : bos_token_ids)
    LLM_REQUIRE(id >= 0 && id < vocab_size) << "model config: bos_token_id " << id << " is outside the vocabulary ("
                                            << vocab_size << ")";
  for (int id : eos_token_ids)
    LLM_REQUIRE(id >= 0 && id < vocab_size) << "model config: eos_token_id " << id << " is outside the vocabulary ("
                                            << vocab_size << ")";
}

float ModelConfig::softmax_scale() const {
  return 1.0f / std::sqrt(query_pre_attn_scalar > 0 ? query_pre_attn_scalar : float(head_dim));
}

json ModelConfig::to_hf_json() const {
  json j;
  j["architectures"] = {architecture};
  j["model_type"] = model_type;
  j["hidden_size"] = hidden_size;
  j["num_hidden_layers"] = num_layers;
  j["num_attention_heads"] = num_heads;
  j["num_key_value_heads"] = num_kv_heads;
  j["head_dim"] = head_dim;
  j["intermediate_size"] = intermediate_size;
  j["vocab_size"] = vocab_size;
  j["max_position_embeddings"] = max_position_embeddings;
  j["rms_norm_eps"] = shortest(rms_norm_eps);
  j["rope_theta"] = shortest(rope_theta);
  if (rope_scaling.type == "none") {
    j["rope_scaling"] = nullptr;
  } else {
    LLM_REQUIRE(rope_scaling.type != "freq_factors")
        << "this model's rope frequency factors (a GGUF rope_freqs tensor that is not llama3's standard scaling) "
           "have no config.json form";
    json s = {{"rope_type", rope_scaling.type}, {"factor", shortest(rope_scaling.factor)}};
    if (rope_scaling.type == "llama3") {
      s["low_freq_factor"] = shortest(rope_scaling.low_freq_factor);
      s["high_freq_factor"] = shortest(rope_scaling.high_freq_factor);
      s["original_max_position_embeddings"] = rope_scaling.original_max_position_embeddings;
    }
    if (rope_scaling.type == "longrope") {
      s["original_max_position_embeddings"] = rope_scaling.original_max_position_embeddings;
      s["attention_factor"] = shortest(rope_scaling.attention_factor);
      json sf = json::array(), lf = json::array();
      for (float f : rope_scaling.short_factor) sf.push_back(shortest(f));
      for (float f : rope_scaling.long_factor) lf.push_back(shortest(f));
      s["short_factor"] = sf;
      s["long_factor"] = lf;
    }
    if (rope_scaling.type == "yarn") {
      s["original_max_position_embeddings"] = rope_scaling.original_max_position_embeddings;
      s["beta_fast"] = shortest(rope_scaling.beta_fast);
      s["beta_slow"] = shortest(rope_scaling.beta_slow);
      s["truncate"] = rope_scaling.truncate;
      s["attention_factor"] = shortest(rope_scaling.attention_factor);
    }
    j["rope_scaling"] = s;
  }
  if (sliding_rope_theta > 0) {  // transformers 5's rope per layer type, the only spelling of it
    json full = j["rope_scaling"].is_null() ? json{{"rope_type", "default"}} : j["rope_scaling"];
    full["rope_theta"] = j["rope_theta"];
    j["rope_parameters"] = {{"full_attention", full},
                            {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", shortest(sliding_rope_theta)}}}};
    j.erase("rope_theta");
    j.erase("rope_scaling");
  }
  if (query_pre_attn_scalar > 0)  // an integer in transformers' Gemma configs (5.x refuses 16.0)
    j["query_pre_attn_scalar"] = query_pre_attn_scalar == std::floor(query_pre_attn_scalar) && query_pre_attn_scalar < 1e9f
                                     ? json(int64_t(query_pre_attn_scalar))
                                     : json(shortest(query_pre_attn_scalar));
  if (attn_logit_softcapping > 0) j["attn_logit_softcapping"] = shortest(attn_logit_softcapping);
  if (final_logit_softcapping > 0) j["final_logit_softcapping"] = shortest(final_logit_softcapping);
  if (rotary_dim > 0 && rotary_dim != head_dim) j["partial_rotary_factor"] = double(rotary_dim) / double(head_dim);
  if (sliding_window > 0) {
    j["sliding_window"] = sliding_window;
    j["use_sliding_window"] = true;  // Qwen2 reads the window only with it
    json types = json::array();
    for (int l = 0; l < num_layers; ++l) types.push_back(layer_window(l) > 0 ? "sliding_attention" : "full_attention");
    // every layer sliding is said by its absence, except where the architecture's default alternates
    if (!sliding_layers.empty() || find_architecture(architecture).sliding_pattern > 0) j["layer_types"] = types;
  }
  if (num_experts > 0) moe_hf_json(*this, j);
  j["tie_word_embeddings"] = tie_word_embeddings;
  j["attention_bias"] = attention_bias;
  j["hidden_act"] = hidden_act;
  if (hidden_act != "silu") j["hidden_activation"] = hidden_act;  // Gemma's spelling
  j["mlp_bias"] = false;
  j["attention_dropout"] = 0.0;
  auto ids = [](const std::vector<int>& v) -> json {
    if (v.empty()) return nullptr;
    if (v.size() == 1) return v[0];
    return v;
  };
  j["bos_token_id"] = ids(bos_token_ids);
  j["eos_token_id"] = ids(eos_token_ids);
  if (pad_token_id) j["pad_token_id"] = *pad_token_id;
  j["torch_dtype"] = torch_dtype;
  j["use_cache"] = true;
  j["initializer_range"] = 0.02;
  j["pretraining_tp"] = 1;
  return j;
}

}  // namespace llmctl
