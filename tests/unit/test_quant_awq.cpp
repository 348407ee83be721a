// AWQ on one decoder layer (quant/algo/awq.h), searched through the family's own forward: the scales
// it folds leave the layer's function unchanged, and on inputs with outlier channels (what AWQ is
// for) the layer quantized after AWQ is closer to the unquantized layer than the layer quantized by
// round-to-nearest alone. A layer's function is read as the next layer's first input (its output,
// normed), through a checkpoint whose layer 0 holds the weights under test.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "engine/model/checkpoint.h"
#include "engine/model/random_checkpoint.h"
#include "quant/algo/awq.h"
#include "quant/algo/dense_layer.h"
#include "quant/algo/family_calibration.h"
#include "tiny_config.h"
#include "source_dir.h"

using namespace llmctl;

namespace {

struct Fixture {
  ModelConfig c = test::tiny_llama_config(64, 2, 16);  // H 64, I 96, 4 q heads over 2 kv heads
  Checkpoint ck = random_checkpoint(c, 3, 0.2f);
  std::vector<std::vector<int32_t>> samples;
  Fixture() {
    std::mt19937 rng(9);
    for (int s = 0; s < 4; ++s) {
      samples.emplace_back();
      for (int t = 0; t < 48; ++t) samples.back().push_back(int32_t(rng() % 64));
    }
  }
  void remake() { ck = random_checkpoint(c, 3, 0.2f); }
  // Embedding columns made large, as LLM activations have a few large channels.
  void outliers() {
    Tensor e = ck.get("model.embed_tokens.weight");
    Tensor big = Tensor::empty_host(DType::F32, e.shape);
    std::memcpy(big.data, e.data, e.nbytes());
    for (int64_t t = 0; t < big.dim(0); ++t)
      for (int64_t ch : {3, 17, 40}) big.ptr<float>()[t * big.dim(1) + ch] *= 25.0f;
    ck.tensors["model.embed_tokens.weight"] = big;
  }
};

Tensor copy(const Tensor& t) {
  Tensor out = Tensor::empty_host(DType::F32, t.shape);
  std::memcpy(out.data, t.data, t.nbytes());
  return out;
}

// ck with layer 0's weights replaced by L's.
Checkpoint with_layer0(const Checkpoint& ck, const quant::DenseLayer& L) {
  Checkpoint out = ck;
  const std::string p = "model.layers.0.";
  out.tensors[p + "input_layernorm.weight"] = copy(L.input_norm);
  out.tensors[p + L.mlp_norm_name + ".weight"] = copy(L.mlp_norm);
  for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"self_attn.q_proj", &L.q}, {"self_attn.k_proj", &L.k},
                                {"self_attn.v_proj", &L.v}, {"self_attn.o_proj", &L.o}, {"mlp.gate_proj", &L.gate},
                                {"mlp.up_proj", &L.up}, {"mlp.down_proj", &L.down}})
    out.tensors[p + name + ".weight"] = copy(*t);
  if (!L.v_bias.empty()) out.tensors[p + "self_attn.v_proj.bias"] = copy(L.v_bias);
  return out;
}

// Layer 0's output as layer 1 first reads it (normed, q/k/v's input) on the samples.
Tensor layer0_out(const Checkpoint& ck, const std::vector<std::vector<int32_t>>& samples) {
  quant::FamilyCalibration f(ck, samples);
  f.run_layer(0, [](quant::LinearSite, const Tensor&, const Tensor&) { return Tensor{}; });
  f.begin_layer(1);
  Tensor got;
  f.probe(
      [&](quant::LinearSite site, const Tensor& x, const Tensor&) {
        const quant::LinearGroup g = site.group;
        if (g == quant::LinearGroup::Qkv) got = copy(x);
        return Tensor{};
      },
      quant::LinearGroup::Qkv);
  return got;
}

double mse(const Tensor& a, const Tensor& b) {
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += std::pow(double(a.ptr<float>()[i]) - b.ptr<float>()[i], 2);
  return s / double(a.numel());
}

void fake_quantize_all(quant::DenseLayer& L, const quant::QuantScheme& s) {
  for (Tensor* w : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down}) {
    std::vector<float> out(size_t(w->numel()));
    quant::fake_quantize(w->ptr<float>(), w->dim(0), w->dim(1), s, out.data());
    std::memcpy(w->data, out.data(), out.size() * sizeof(float));
  }
}

// AWQ (scales, then clipping unless max_shrink is 0) of fx's layer 0, searched on fx's samples.
quant::DenseLayer awq(Fixture& fx, const quant::AwqOptions& o, quant::AwqLayerReport* r = nullptr) {
  quant::FamilyCalibration f(fx.ck, fx.samples);
  f.begin_layer(0);
  quant::AwqInputs in = quant::awq_inputs(f);
  quant::DenseLayer L = quant::DenseLayer::from_checkpoint(fx.ck, 0);
  const quant::AwqLayerReport rep = quant::awq_scale_layer(f, L, in, o);
  quant::awq_clip_layer(L, in, o);
  if (r) *r = rep;
  return L;
}

// Worst relative change of layer 0's unquantized output when its weights are AWQ's folded ones
// (without clipping the folds alone must leave it unchanged).
double fold_change(Fixture& fx, quant::AwqLayerReport& r) {
  quant::AwqOptions o;
  o.scheme = {4, 32, false};
  o.max_shrink = 0;  // no clipping: scales only
  const quant::DenseLayer L = awq(fx, o, &r);
  const Tensor before = layer0_out(fx.ck, fx.samples), after = layer0_out(with_layer0(fx.ck, L), fx.samples);
  double worst = 0;
  for (int64_t i = 0; i < before.numel(); ++i)
    worst = std::max(worst, std::fabs(double(before.ptr<float>()[i]) - after.ptr<float>()[i]) /
                                (1.0 + std::fabs(double(before.ptr<float>()[i]))));
  return worst;
}

}  // namespace

TEST_CASE("awq: folded scales leave the unquantized layer's output unchanged (no clipping)") {
  Fixture fx;
  fx.outliers();
  quant::AwqLayerReport r;
  CHECK(fold_change(fx, r) < 1e-4);
  CHECK(r.ratio_attn >= 0);
  CHECK(r.loss_after <= r.loss_before);
  CHECK(r.ratio_o == -1);  // GQA: v -> o is skipped, as in AutoAWQ / llm-compressor
}

TEST_CASE("awq: a Qwen2-shaped layer (q/k/v biases, no GQA) folds v -> o and v's bias unchanged") {
  Fixture fx;
  fx.c.architecture = "Qwen2ForCausalLM";
  fx.c.num_kv_heads = fx.c.num_heads;  // v's outputs are o's inputs one to one
  fx.c.attention_bias = true;
  fx.remake();
  for (const char* b : {"q", "k", "v"}) {  // biases large enough that dropping the fold shows
    float* p = fx.ck.tensors.at(std::string("model.layers.0.self_attn.") + b + "_proj.bias").ptr<float>();
    for (int64_t i = 0; i < 64; ++i) p[i] = 0.5f * std::sin(float(i) * 0.7f + float(*b));
  }
  fx.outliers();
  quant::AwqLayerReport r;
  CHECK(fold_change(fx, r) < 1e-4);
  MESSAGE("v -> o ratio " << r.ratio_o);
  CHECK(r.ratio_o > 0);  // the v -> o search ran and chose scales other than 1
}

TEST_CASE("awq: a Qwen3-shaped layer (q/k head norms) searches through them and folds unchanged") {
  Fixture fx;
  fx.c.architecture = "Qwen3ForCausalLM";
  fx.c.qk_norm = true;
  fx.remake();
  fx.outliers();
  quant::AwqLayerReport r;
  CHECK(fold_change(fx, r) < 1e-4);
  CHECK(r.loss_after <= r.loss_before);
}

TEST_CASE("awq: on outlier activations the quantized layer is closer to the original than RTN's") {
  Fixture fx;
  fx.outliers();
  const quant::QuantScheme s{4, 32, false};
  const Tensor ref = layer0_out(fx.ck, fx.samples);

  quant::DenseLayer rtn = quant::DenseLayer::from_checkpoint(fx.ck, 0);
  fake_quantize_all(rtn, s);
  const double err_rtn = mse(layer0_out(with_layer0(fx.ck, rtn), fx.samples), ref);

  quant::AwqOptions o;
  o.scheme = s;
  quant::DenseLayer a = awq(fx, o);
  fake_quantize_all(a, s);
  const double err_awq = mse(layer0_out(with_layer0(fx.ck, a), fx.samples), ref);
  MESSAGE("layer output MSE: rtn " << err_rtn << ", awq " << err_awq);
  CHECK(err_awq < 0.8 * err_rtn);
}

TEST_CASE("awq: Gemma 2 and 3 (sandwich norms run as 1 + w, GeGLU, soft-capping, q/k norms) fold unchanged") {
  for (const char* name : {"tiny_gemma2", "tiny_gemma3"}) {
    CAPTURE(name);
    Fixture fx;
    fx.ck = load_checkpoint(std::string(llmctl::test::source_dir()) + "/tests/golden/families/" + name);
    fx.c = fx.ck.config;
    fx.samples.clear();
    std::mt19937 rng(5);
    for (int s = 0; s < 3; ++s) {
      fx.samples.emplace_back();
      for (int t = 0; t < 40; ++t) fx.samples.back().push_back(int32_t(rng() % uint32_t(fx.c.vocab_size)));
    }
    const quant::DenseLayer L = quant::DenseLayer::from_checkpoint(fx.ck, 0);
    CHECK(L.mlp_norm_name == "pre_feedforward_layernorm");
    CHECK(L.norm_offset == 1.0f);
    quant::AwqLayerReport r;
    CHECK(fold_change(fx, r) < 1e-4);
    CHECK(r.loss_after <= r.loss_before);
  }
}
