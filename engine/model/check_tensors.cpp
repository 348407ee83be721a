#include "engine/model/check_tensors.h"

#include <set>
#include <sstream>
#include <stdexcept>

#include "engine/core/error.h"
#include "engine/model/kv_scales.h"
#include "engine/model/registry.h"

namespace llmctl {

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

// "a, b, c and 12 more": long lists (a config promising 1000 layers) stay readable.
std::string list_text(const std::vector<std::string>& items, size_t shown = 6) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < shown; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > shown) out += " and " + std::to_string(items.size() - shown) + " more";
  return out;
}

bool floating(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

}  // namespace

std::vector<std::string> check_checkpoint_tensors(const Checkpoint& ck) {
  const ModelConfig& c = ck.config;
  const std::string where = "checkpoint '" + ck.source_path + "'";
  std::vector<std::string> missing, wrong;
  std::set<std::string> expected;
  for (const WeightSpec& spec : model_tensor_specs(c)) {
    expected.insert(spec.name);
    auto it = ck.tensors.find(spec.name);
    auto qit = ck.quantized.find(spec.name);
    // A tied table kept only as the lm_head's quantized copy (LoadOptions::quantized_embedding).
    if (spec.name == "model.embed_tokens.weight" && it == ck.tensors.end() && c.tie_word_embeddings)
      qit = ck.quantized.find("lm_head.weight");
    if (it != ck.tensors.end() && qit != ck.quantized.end()) {
      wrong.push_back(spec.name + " is both dense and quantized");
      continue;
    }
    if (qit != ck.quantized.end()) {  // a linear kept quantized: its [N, K] and its own consistency
      const QuantizedEntry& q = qit->second;
      const std::vector<int64_t> shape{q.n(), q.k()};
      if (shape != spec.shape || spec.norm) {
        wrong.push_back(spec.name + " (quantized) has shape " + shape_text(shape) + ", expected " +
                        shape_text(spec.shape));
        continue;
      }
      if (q.released()) {
        wrong.push_back(spec.name + " (quantized) was already loaded and released (the checkpoint was built for one "
                                    "model: Checkpoint::release_after_upload)");
        continue;
      }
      if (q.is_deferred()) continue;  // checked as it is decoded (QuantizedEntry::weight)
      try {
        q.weight().validate();
      } catch (const std::invalid_argument& e) {
        wrong.push_back(spec.name + " (quantized): " + e.what());
      }
      continue;
    }
    if (it == ck.tensors.end()) {
      missing.push_back(spec.name);
      continue;
    }
    const Tensor& t = it->second;
    if (t.shape != spec.shape)
      wrong.push_back(spec.name + " has shape " + shape_text(t.shape) + ", expected " + shape_text(spec.shape));
    else if (!floating(t.dtype))
      wrong.push_back(spec.name + " has dtype " + dtype_name(t.dtype) + ", expected f32, f16 or bf16");
  }
  if (!missing.empty()) {
    std::string why;
    if (c.attention_bias && missing.front().ends_with("_proj.bias"))
      why = " (the config sets attention_bias, so q/k/v projections need bias tensors)";
    LLM_THROW() << where << " is missing " << missing.size() << " tensor" << (missing.size() > 1 ? "s" : "")
                << " the config (" << c.num_layers << " layers, hidden " << c.hidden_size << ", vocab "
                << c.vocab_size << ") implies: " << list_text(missing) << why;
  }
  LLM_REQUIRE(wrong.empty()) << where << ": " << wrong.size() << " tensor" << (wrong.size() > 1 ? "s do" : " does")
                             << " not match the config: " << list_text(wrong, 4);
  // Every other tensor is used or refused by name: one the model cannot place (a layer past the
  // last, `model.layers.-1...`, a module this architecture lacks, a stray quantization tensor) may
  // be one the publisher meant to change the output, and running without it is a silent wrong
  // answer. Accepted unused: a tied head saved anyway (transformers does) and the rotary inverse
  // frequencies old transformers saved (recomputed from the config).
  std::vector<std::string> extra, derived;
  for (const auto& [name, t] : ck.tensors) {
    if (expected.count(name) || is_kv_scale_name(name)) continue;  // kv scales: load_kv_scales checks them
    if (name == "lm_head.weight" && c.tie_word_embeddings && t.shape == std::vector<int64_t>{c.vocab_size, c.hidden_size})
      continue;
    (name.ends_with(".rotary_emb.inv_freq") ? derived : extra).push_back(name);
  }
  for (const auto& [name, q] : ck.quantized)
    if (!expected.count(name) && !(name == "lm_head.weight" && c.tie_word_embeddings))  // a tied table's packed copy
      extra.push_back(name + " (quantized)");
  LLM_REQUIRE(extra.empty()) << where << " has " << extra.size() << " tensor" << (extra.size() > 1 ? "s" : "")
                             << " this " << c.architecture << " model (" << c.num_layers
                             << " layers) has no place for: " << list_text(extra)
                             << "; llmctl runs every tensor of a checkpoint or refuses it";
  std::vector<std::string> notes;
  if (!derived.empty())
    notes.push_back(where + " has " + std::to_string(derived.size()) + " rotary inverse-frequency tensor" +
                    (derived.size() > 1 ? "s" : "") + " (unused: computed from the config's rope parameters): " +
                    list_text(derived));
  return notes;
}

}  // namespace llmctl
