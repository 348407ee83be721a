// load_checkpoint of quantized HF directories (engine/model/quantized_checkpoint.h): a random tiny
// Llama whose linears are packed in each layout (compressed-tensors, AutoAWQ GEMM, GPTQ) loads with
// every linear dense f32 and equal, bit for bit, to the dequantized QuantizedLinear it was packed
// from; dense modules (ignored) stay as they are; inconsistent checkpoints are refused by name.
// With LoadOptions::keep_quantized the linears stay quantized (GroupAffineWeight, the same values
// up to f32 rounding), the model built from them loads canonical Int4Group / Int8Group weights and
// gives the dense checkpoint's logits within rounding; act-order g_idx weights load dense with a note.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "engine/core/error.h"
#include "engine/model/checkpoint.h"
#include "engine/model/random_checkpoint.h"
#include "engine/model/registry.h"
#include "engine/model/safetensors.h"
#include "format_test_util.h"
#include "quant/format/checkpoint_layout.h"
#include "quant/format/half_float.h"
#include "quant_load_util.h"
#include "tiny_config.h"

using namespace llmctl;
using namespace llmctl::test;
using nlohmann::json;

namespace {

DType dtype_of(const std::string& name) {
  if (name == "I32") return DType::I32;
  if (name == "I64") return DType::I64;
  if (name == "F16") return DType::F16;
  if (name == "BF16") return DType::BF16;
  REQUIRE(name == "F32");
  return DType::F32;
}

Tensor to_tensor(const quant::PackedTensor& p) {
  Tensor t = Tensor::empty_host(dtype_of(p.dtype), p.shape);
  std::memcpy(t.data, p.bytes.data(), p.bytes.size());
  return t;
}

quant::QuantizedLinear random_linear(int64_t n, int64_t k, const quant::QuantScheme& s, std::mt19937& rng) {
  quant::QuantizedLinear w;
  w.n = n;
  w.k = k;
  w.scheme = s;
  const int64_t G = w.groups();
  std::uniform_int_distribution<int> code(0, s.max_code()), zero(1, s.max_code());
  std::uniform_real_distribution<float> mag(0.01f, 0.05f);
  for (int64_t i = 0; i < n * k; ++i) w.q.push_back(uint8_t(code(rng)));
  for (int64_t i = 0; i < n * G; ++i) {
    w.scales.push_back(quant::half_bits_to_f32(quant::f32_to_half_bits(mag(rng))));
    w.zeros.push_back(s.symmetric ? s.sym_zero() : zero(rng));
  }
  return w;
}

struct Written {
  std::map<std::string, std::vector<float>> expected;  // "<prefix>.weight" -> dequantized [N, K]
  std::map<std::string, Tensor> tensors;
};

// Packs every linear of a random checkpoint except `dense_module` in layout info.layout; with
// shuffled_g_idx, each with an act-order g_idx that scatters every group's columns (GPTQ desc_act
// without static groups).
Written quantize_checkpoint(const ModelConfig& c, const quant::QuantConfigInfo& info, const std::string& dense_module,
                            bool shuffled_g_idx = false) {
  Checkpoint ck = random_checkpoint(c, 11, 0.05f);
  std::mt19937 rng(5);
  Written out;
  for (auto& [name, t] : ck.tensors) {
    const bool linear = name.find("_proj.weight") != std::string::npos;
    const std::string prefix = name.substr(0, name.size() - std::string(".weight").size());
    if (!linear || prefix == dense_module) {
      out.tensors[name] = t;
      continue;
    }
    quant::QuantizedLinear w = random_linear(t.shape[0], t.shape[1], info.scheme, rng);
    if (shuffled_g_idx) {
      std::vector<int32_t> perm(size_t(w.k));
      for (int64_t i = 0; i < w.k; ++i) perm[size_t(i)] = int32_t(i);
      std::shuffle(perm.begin(), perm.end(), rng);
      for (int64_t i = 0; i < w.k; ++i) w.g_idx.push_back(perm[size_t(i)] / info.scheme.group_size);
    }
    out.expected[name] = quant::dequantize(w);
    for (auto& [suffix, p] : quant::pack_linear_weight(info.layout, w, "F32"))
      out.tensors[prefix + "." + suffix] = to_tensor(p);
  }
  return out;
}

void write_dir(const ScratchDir& dir, const ModelConfig& c, const json& qc, const std::map<std::string, Tensor>& t) {
  json cfg = c.to_hf_json();
  if (!qc.is_null()) cfg["quantization_config"] = qc;
  write_text(dir.file("config.json"), cfg.dump());
  write_safetensors(dir.file("model.safetensors"), {t.begin(), t.end()});
}

}  // namespace

TEST_CASE("quantized checkpoint: every layout loads as the dequantized weights") {
  const ModelConfig c = tiny_llama_config(64, 2, 16);  // hidden 64, intermediate 96: group 32 divides both
  struct Case {
    quant::QuantLayout layout;
    quant::QuantScheme scheme;
  };
  const Case cases[] = {{quant::QuantLayout::CompressedTensors, {4, 32, true}},
                        {quant::QuantLayout::CompressedTensors, {8, -1, false}},
                        {quant::QuantLayout::AutoAwqGemm, {4, 32, false}},
                        {quant::QuantLayout::Gptq, {4, 32, true}},
                        {quant::QuantLayout::Gptq, {8, 32, false}}};
  for (const Case& cs : cases) {
    quant::QuantConfigInfo info;
    info.layout = cs.layout;
    info.scheme = cs.scheme;
    info.ignore = {"lm_head", "model.layers.1.mlp.down_proj"};
    INFO(info.label());
    const Written w = quantize_checkpoint(c, info, "model.layers.1.mlp.down_proj");
    ScratchDir dir("qck");
    write_dir(dir, c, quant::make_quantization_config(info), w.tensors);
    const Checkpoint ck = load_checkpoint(dir.path.string());
    REQUIRE(ck.config.source_quantization.has_value());
    CHECK(ck.config.source_quantization->layout == cs.layout);
    CHECK(ck.config.source_quantization->scheme.bits == cs.scheme.bits);
    CHECK(w.expected.size() == 13);  // 7 linears x 2 layers, one left dense
    for (const auto& [name, values] : w.expected) {
      INFO(name);
      const Tensor& t = ck.get(name);
      REQUIRE(t.dtype == DType::F32);
      CHECK(std::memcmp(t.data, values.data(), values.size() * 4) == 0);
    }
    const Tensor& dense = ck.get("model.layers.1.mlp.down_proj.weight");  // ignored: as stored
    CHECK(std::memcmp(dense.data, w.tensors.at("model.layers.1.mlp.down_proj.weight").data, dense.nbytes()) == 0);
    for (const auto& [name, t] : ck.tensors) {
      INFO(name);
      CHECK(name.find("qweight") == std::string::npos);
      CHECK(name.find("weight_packed") == std::string::npos);
      CHECK(name.find("scale") == std::string::npos);
    }
  }
}

TEST_CASE("quantized checkpoint: inconsistent checkpoints are refused by name") {
  const ModelConfig c = tiny_llama_config(64, 2, 16);
  quant::QuantConfigInfo info;
  info.layout = quant::QuantLayout::Gptq;
  info.scheme = {4, 32, true};
  const json qc = quant::make_quantization_config(info);
  const Written w = quantize_checkpoint(c, info, "");
  ScratchDir dir("qck_bad");

  auto refused = [&](const std::map<std::string, Tensor>& t, const json& q, const char* needle) {
    write_dir(dir, c, q, t);
    CHECK_THROWS_WITH_AS(load_checkpoint(dir.path.string()), doctest::Contains(needle), InputError);
  };
  // packed and dense at once
  auto both = w.tensors;
  both["model.layers.0.self_attn.q_proj.weight"] = Tensor::zeros_host(DType::F32, {64, 64});
  refused(both, qc, "both quantized and dense");
  // a quantized module the model does not have
  auto extra = w.tensors;
  extra["model.layers.7.mlp.up_proj.qweight"] = w.tensors.at("model.layers.0.mlp.up_proj.qweight");
  refused(extra, qc, "model.layers.7.mlp.up_proj.qweight");
  // a quantization_config with no packed tensor
  refused(random_checkpoint(c, 1, 0.05f).tensors, qc, "no tensor is named");
  // a tensor of the wrong shape, named with its module
  auto bad = w.tensors;
  bad["model.layers.1.self_attn.o_proj.scales"] = Tensor::zeros_host(DType::F16, {1, 64});
  refused(bad, qc, "model.layers.1.self_attn.o_proj");
  // another quant_method
  refused(w.tensors, json{{"quant_method", "bitsandbytes"}}, "'bitsandbytes' is not supported");
  // the right one loads
  write_dir(dir, c, qc, w.tensors);
  CHECK(load_checkpoint(dir.path.string()).config.source_quantization.has_value());
  // no quantization_config: not quantized
  write_dir(dir, c, json(), random_checkpoint(c, 1, 0.05f).tensors);
  CHECK_FALSE(load_checkpoint(dir.path.string()).config.source_quantization.has_value());
}

TEST_CASE("quantized checkpoint, keep_quantized: every layout stays quantized and gives the dense logits") {
  const ModelConfig c = tiny_llama_config(64, 2, 16);  // hidden 64, intermediate 96: group 32 divides both
  struct Case {
    quant::QuantLayout layout;
    quant::QuantScheme scheme;
  };
  const Case cases[] = {{quant::QuantLayout::CompressedTensors, {4, 32, true}},
                        {quant::QuantLayout::CompressedTensors, {8, -1, false}},
                        {quant::QuantLayout::CompressedTensors, {8, 32, true}},
                        {quant::QuantLayout::AutoAwqGemm, {4, 32, false}},
                        {quant::QuantLayout::Gptq, {4, 32, true}},
                        {quant::QuantLayout::Gptq, {8, 32, false}}};
  std::mt19937 rng(17);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 19; ++i) tokens.push_back(int32_t(rng() % 64));
  for (const Case& cs : cases) {
    quant::QuantConfigInfo info;
    info.layout = cs.layout;
    info.scheme = cs.scheme;
    info.ignore = {"lm_head", "model.layers.1.mlp.down_proj"};
    INFO(info.label());
    const Written w = quantize_checkpoint(c, info, "model.layers.1.mlp.down_proj");
    ScratchDir dir("qck_keep");
    write_dir(dir, c, quant::make_quantization_config(info), w.tensors);
    LoadOptions keep;
    keep.keep_quantized = true;
    const Checkpoint q = load_checkpoint(dir.path.string(), keep);
    CHECK(q.quantized.size() == 13);
    CHECK(q.notes.empty());
    for (const auto& [name, values] : w.expected) {
      INFO(name);
      REQUIRE(q.quantized.count(name) == 1);
      CHECK_FALSE(q.has(name));
      const quant::GroupAffineWeight& g = q.quantized.at(name);
      CHECK(g.bits == cs.scheme.bits);
      const std::vector<float> got = quant::dequantize(g);
      REQUIRE(got.size() == values.size());
      double worst = 0, scale = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        worst = std::max(worst, std::fabs(double(got[i]) - values[i]));
        scale = std::max(scale, std::fabs(double(values[i])));
      }
      CHECK(worst <= scale * 1e-6);  // (q - z) * s vs s * q + (-z * s): f32 rounding only
    }
    for (const auto& [name, t] : q.tensors) {
      INFO(name);
      CHECK(name.find("qweight") == std::string::npos);
      CHECK(name.find("weight_packed") == std::string::npos);
    }
    CHECK(q.has("model.layers.1.mlp.down_proj.weight"));  // ignored: dense, as stored

    test::CanonicalRecordingBackend rec;
    auto qmodel = make_model(q, rec);
    CHECK(rec.uploaded.size() == 7);  // layer 0: qkv, o, gate_up, down; layer 1: qkv, o, gate_up
    for (const LinearWeight& lw : rec.uploaded)
      CHECK(lw.format == (cs.scheme.bits == 4 ? WeightFormat::Int4Group : WeightFormat::Int8Group));
    auto cpu = make_cpu_backend(1);
    auto dmodel = make_model(load_checkpoint(dir.path.string()), *cpu);
    const std::vector<float> want = test::prefill_logits(*dmodel, tokens);
    const double diff = test::relative_max_diff(test::prefill_logits(*qmodel, tokens), want);
    CHECK(diff < 1e-5);
  }
}

TEST_CASE("quantized checkpoint, keep_quantized: act-order g_idx weights are loaded dense, with a note") {
  const ModelConfig c = tiny_llama_config(64, 2, 16);
  quant::QuantConfigInfo info;
  info.layout = quant::QuantLayout::Gptq;
  info.scheme = {4, 32, true};
  info.act_order = true;
  const Written w = quantize_checkpoint(c, info, "", /*shuffled_g_idx=*/true);
  ScratchDir dir("qck_actorder");
  write_dir(dir, c, quant::make_quantization_config(info), w.tensors);
  LoadOptions keep;
  keep.keep_quantized = true;
  const Checkpoint q = load_checkpoint(dir.path.string(), keep);
  CHECK(q.quantized.empty());
  for (const auto& [name, values] : w.expected) {  // dense exactly as without keep_quantized
    INFO(name);
    const Tensor& t = q.get(name);
    REQUIRE(t.dtype == DType::F32);
    CHECK(std::memcmp(t.data, values.data(), values.size() * 4) == 0);
  }
  REQUIRE(q.notes.size() == 1);
  CHECK(q.notes[0].find("14 of 14") != std::string::npos);
  CHECK(q.notes[0].find("act-order") != std::string::npos);
}
