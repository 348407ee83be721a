// AWQ on one decoder layer (quant/algo/awq.h): the scales it folds leave the layer's function
// unchanged, and on inputs with outlier channels (what AWQ is for) the layer quantized after AWQ
// is closer to the unquantized layer than the layer quantized by round-to-nearest alone.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "engine/backend/backend.h"
#include "engine/model/random_checkpoint.h"
#include "quant/algo/awq.h"
#include "quant/algo/calibration_forward.h"
#include "tiny_config.h"

using namespace llmctl;

namespace {

struct Fixture {
  ModelConfig c = test::tiny_llama_config(64, 1, 16);  // H 64, I 96, 4 q heads over 2 kv heads
  Checkpoint ck = random_checkpoint(c, 3, 0.2f);
  std::unique_ptr<Backend> be = make_cpu_backend(2);
  std::vector<std::vector<int32_t>> samples;
  Fixture() {
    std::mt19937 rng(9);
    for (int s = 0; s < 4; ++s) {
      samples.emplace_back();
      for (int t = 0; t < 48; ++t) samples.back().push_back(int32_t(rng() % 64));
    }
  }
};

// The layer's output for input x (a copy: x is not changed).
Tensor layer_out(quant::CalibrationForward& f, const quant::DenseLayer& L, const Tensor& x) {
  const ModelConfig& c = f.config();
  const int64_t H = c.hidden_size;
  Tensor h = f.alloc(H);
  std::memcpy(h.data, x.data, x.nbytes());
  f.layer(L, h);
  return h;
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

// Input with a few large channels, as LLM activations have.
Tensor outlier_input(quant::CalibrationForward& f, const Checkpoint& ck) {
  Tensor x = f.embed(ck.get("model.embed_tokens.weight"));
  const int64_t H = x.dim(1);
  for (int64_t t = 0; t < x.dim(0); ++t)
    for (int64_t ch : {3, 17, 40}) x.ptr<float>()[t * H + ch] *= 25.0f;
  return x;
}

}  // namespace

namespace {

// Runs awq_layer without clipping on fx's layer 0 and returns the worst relative change of the
// unquantized layer's output (the folds alone must leave it unchanged) and the report.
double fold_change(Fixture& fx, quant::AwqLayerReport& r) {
  quant::CalibrationForward f(*fx.be, fx.c, fx.samples);
  Tensor x = outlier_input(f, fx.ck);
  quant::DenseLayer L = quant::DenseLayer::from_checkpoint(fx.ck, 0);
  const Tensor before = layer_out(f, L, x);
  quant::AwqOptions o;
  o.scheme = {4, 32, false};
  o.max_shrink = 0;  // no clipping: scales only
  r = quant::awq_layer(f, L, x, o);
  const Tensor after = layer_out(f, L, x);
  double worst = 0;
  for (int64_t i = 0; i < before.numel(); ++i)
    worst = std::max(worst, std::fabs(double(before.ptr<float>()[i]) - after.ptr<float>()[i]) /
                                (1.0 + std::fabs(double(before.ptr<float>()[i]))));
  return worst;
}

}  // namespace

TEST_CASE("awq: folded scales leave the unquantized layer's output unchanged (no clipping)") {
  Fixture fx;
  quant::AwqLayerReport r;
  CHECK(fold_change(fx, r) < 1e-4);
  CHECK(r.ratio_attn >= 0);
  CHECK(r.loss_after <= r.loss_before);
  CHECK(r.ratio_o == -1);  // GQA: v -> o is skipped, as in AutoAWQ / llm-compressor
}

TEST_CASE("awq: a Qwen2-shaped layer (q/k/v biases, no GQA) folds v -> o and v's bias unchanged") {
  Fixture fx;
  fx.c.num_kv_heads = fx.c.num_heads;  // v's outputs are o's inputs one to one
  fx.c.attention_bias = true;
  fx.ck = random_checkpoint(fx.c, 3, 0.2f);
  for (const char* b : {"q", "k", "v"}) {  // biases large enough that dropping the fold shows
    float* p = fx.ck.tensors.at(std::string("model.layers.0.self_attn.") + b + "_proj.bias").ptr<float>();
    for (int64_t i = 0; i < 64; ++i) p[i] = 0.5f * std::sin(float(i) * 0.7f + float(*b));
  }
  quant::AwqLayerReport r;
  CHECK(fold_change(fx, r) < 1e-4);
  MESSAGE("v -> o ratio " << r.ratio_o);
  CHECK(r.ratio_o > 0);  // the v -> o search ran and chose scales other than 1
}

TEST_CASE("awq: on outlier activations the quantized layer is closer to the original than RTN's") {
  Fixture fx;
  quant::CalibrationForward f(*fx.be, fx.c, fx.samples);
  Tensor x = outlier_input(f, fx.ck);
  const quant::QuantScheme s{4, 32, false};
  const quant::DenseLayer orig = quant::DenseLayer::from_checkpoint(fx.ck, 0);
  const Tensor ref = layer_out(f, orig, x);

  quant::DenseLayer rtn = quant::DenseLayer::from_checkpoint(fx.ck, 0);
  fake_quantize_all(rtn, s);
  const double err_rtn = mse(layer_out(f, rtn, x), ref);

  quant::DenseLayer awq = quant::DenseLayer::from_checkpoint(fx.ck, 0);
  quant::AwqOptions o;
  o.scheme = s;
  quant::awq_layer(f, awq, x, o);
  fake_quantize_all(awq, s);
  const double err_awq = mse(layer_out(f, awq, x), ref);
  MESSAGE("layer output MSE: rtn " << err_rtn << ", awq " << err_awq);
  CHECK(err_awq < 0.8 * err_rtn);
}
