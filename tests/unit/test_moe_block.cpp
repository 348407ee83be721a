// The mixture-of-experts block (engine/model/layers/moe_block.h) on the CPU backend against a naive
// reference written here (softmax, top k, each chosen expert's SwiGLU MLP, weighted sum, the shared
// expert under its sigmoid gate), on random weights; the routing's ties and renormalization; and a
// token's output alone equals its output among others.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/layers/moe_block.h"
#include "engine/model/weights/load_weights.h"

using namespace llmctl;

namespace {

struct HostLinear {
  int64_t n, k;
  std::vector<float> w;  // [n, k]
};

HostLinear random_linear(std::mt19937& rng, int64_t n, int64_t k, float scale) {
  std::normal_distribution<float> d(0.f, scale);
  HostLinear l{n, k, std::vector<float>(size_t(n * k))};
  for (float& x : l.w) x = d(rng);
  return l;
}

LinearWeight upload(Backend& be, const HostLinear& l) {
  Tensor h = Tensor::empty_host(DType::F32, {l.n, l.k});
  std::copy(l.w.begin(), l.w.end(), h.ptr<float>());
  return dense_linear(be.upload(h, DType::F32));
}

std::vector<double> matvec(const HostLinear& l, const double* x) {
  std::vector<double> y(size_t(l.n), 0.0);
  for (int64_t i = 0; i < l.n; ++i)
    for (int64_t j = 0; j < l.k; ++j) y[size_t(i)] += double(l.w[size_t(i * l.k + j)]) * x[j];
  return y;
}

// SwiGLU: down(silu(gate x) * up x), gate_up stacked [2I, H].
std::vector<double> mlp(const HostLinear& gate_up, const HostLinear& down, const double* x) {
  const std::vector<double> gu = matvec(gate_up, x);
  const size_t I = gu.size() / 2;
  std::vector<double> a(I);
  for (size_t i = 0; i < I; ++i) a[i] = gu[i] / (1.0 + std::exp(-gu[i])) * gu[I + i];
  return matvec(down, a.data());
}

struct Fixture {
  int H = 24, I = 12, E = 6, k = 2, S = 10;
  HostLinear router;
  std::vector<HostLinear> gate_up, down;
  HostLinear shared_gate_up, shared_down, shared_gate;
  bool shared = false, renormalize = false;

  Fixture(bool with_shared, bool renorm, uint32_t seed) : shared(with_shared), renormalize(renorm) {
    std::mt19937 rng(seed);
    router = random_linear(rng, E, H, 0.5f);
    for (int e = 0; e < E; ++e) {
      gate_up.push_back(random_linear(rng, 2 * I, H, 0.3f));
      down.push_back(random_linear(rng, H, I, 0.3f));
    }
    shared_gate_up = random_linear(rng, 2 * S, H, 0.3f);
    shared_down = random_linear(rng, H, S, 0.3f);
    shared_gate = random_linear(rng, 1, H, 0.5f);
  }

  MoeBlock block(Backend& be) const {
    MoeBlock b;
    b.router = upload(be, router);
    for (int e = 0; e < E; ++e) b.experts.push_back(GatedMlp{upload(be, gate_up[size_t(e)]), upload(be, down[size_t(e)])});
    if (shared) {
      b.shared = GatedMlp{upload(be, shared_gate_up), upload(be, shared_down)};
      b.shared_gate = upload(be, shared_gate);
    }
    b.top_k = k;
    b.renormalize = renormalize;
    return b;
  }

  std::vector<double> reference(const double* x) const {
    const std::vector<double> logits = matvec(router, x);
    std::vector<double> p(logits.size());
    const double m = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (size_t e = 0; e < p.size(); ++e) sum += p[e] = std::exp(logits[e] - m);
    for (double& v : p) v /= sum;
    std::vector<int> order(static_cast<size_t>(E));
    for (int e = 0; e < E; ++e) order[size_t(e)] = e;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[size_t(a)] > p[size_t(b)]; });
    double chosen = 0;
    for (int j = 0; j < k; ++j) chosen += p[size_t(order[size_t(j)])];
    std::vector<double> out(static_cast<size_t>(H), 0.0);
    for (int j = 0; j < k; ++j) {
      const int e = order[size_t(j)];
      const double w = renormalize ? p[size_t(e)] / chosen : p[size_t(e)];
      const std::vector<double> y = mlp(gate_up[size_t(e)], down[size_t(e)], x);
      for (int h = 0; h < H; ++h) out[size_t(h)] += w * y[size_t(h)];
    }
    if (shared) {
      const double g = 1.0 / (1.0 + std::exp(-matvec(shared_gate, x)[0]));
      const std::vector<double> y = mlp(shared_gate_up, shared_down, x);
      for (int h = 0; h < H; ++h) out[size_t(h)] += g * y[size_t(h)];
    }
    return out;
  }
};

struct Buffers {
  MoeBlock::Scratch s;
  Tensor out;
  Buffers(Backend& be, int T, const Fixture& f) {
    // the routed rows (k per token) at the experts' width, the shared expert's at its own
    const int n = T * f.k;
    s = {be.alloc(DType::F32, {T, f.E}),     be.alloc(DType::F32, {n, f.H}),      be.alloc(DType::F32, {n, f.H}),
         be.alloc(DType::F32, {n, 2 * f.I}), be.alloc(DType::F32, {n, f.I}),      be.alloc(DType::F32, {T, 2 * f.S}),
         be.alloc(DType::F32, {T, f.S})};
    out = be.alloc(DType::F32, {T, f.H});
  }
};

}  // namespace

TEST_CASE("moe: routing takes the top k by probability, ties to the lower expert, renormalized when asked") {
  const float logits[] = {1.f, 3.f, 3.f, 0.f,   // token 0: experts 1 and 2 tie at the top
                          2.f, 2.f, 2.f, 2.f};  // token 1: all tie
  MoeRouting r = route_tokens(logits, 2, 4, 2, false);
  CHECK(r.tokens[1] == std::vector<int32_t>{0, 1});
  CHECK(r.tokens[2] == std::vector<int32_t>{0});
  CHECK(r.tokens[0] == std::vector<int32_t>{1});
  CHECK(r.tokens[3].empty());
  const double z = std::exp(1.0) + 2 * std::exp(3.0) + 1.0;
  CHECK(r.weights[1][0] == doctest::Approx(std::exp(3.0) / z));
  CHECK(r.weights[0][0] == doctest::Approx(0.25));
  r = route_tokens(logits, 2, 4, 2, true);
  CHECK(r.weights[1][0] == doctest::Approx(0.5));
  CHECK(r.weights[0][0] == doctest::Approx(0.5));
  CHECK(r.weights[1][1] == doctest::Approx(0.5));
}

TEST_CASE("moe: the block equals the naive reference, with and without a shared expert; a token alone equals it among others") {
  auto be = make_cpu_backend(2);
  const int T = 9;
  for (int variant = 0; variant < 4; ++variant) {
    CAPTURE(variant);
    const Fixture f(variant & 1, variant & 2, 100 + uint32_t(variant));
    const MoeBlock block = f.block(*be);
    std::mt19937 rng(7 + uint32_t(variant));
    std::normal_distribution<float> d(0.f, 1.f);
    Tensor xh = Tensor::empty_host(DType::F32, {T, f.H});
    for (int64_t i = 0; i < xh.numel(); ++i) xh.ptr<float>()[i] = d(rng);
    const Tensor x = be->upload(xh, DType::F32);
    Buffers all(*be, T, f);
    block.run(*be, x, all.s, all.out);
    const Tensor got = be->to_host_f32(all.out);
    double worst = 0;
    for (int t = 0; t < T; ++t) {
      std::vector<double> xt(static_cast<size_t>(f.H));
      for (int h = 0; h < f.H; ++h) xt[size_t(h)] = xh.ptr<float>()[t * f.H + h];
      const std::vector<double> ref = f.reference(xt.data());
      for (int h = 0; h < f.H; ++h) worst = std::max(worst, std::abs(ref[size_t(h)] - got.ptr<float>()[t * f.H + h]));
      // the same token alone
      Tensor one_h = Tensor::empty_host(DType::F32, {1, f.H});
      std::copy(xh.ptr<float>() + t * f.H, xh.ptr<float>() + (t + 1) * f.H, one_h.ptr<float>());
      Buffers one(*be, 1, f);
      block.run(*be, be->upload(one_h, DType::F32), one.s, one.out);
      const Tensor alone = be->to_host_f32(one.out);
      for (int h = 0; h < f.H; ++h) CHECK(alone.ptr<float>()[h] == doctest::Approx(got.ptr<float>()[t * f.H + h]).epsilon(1e-6));
    }
    CHECK(worst < 1e-5);
  }
}

TEST_CASE("moe: a token reads the router's and its k experts' weights, no other expert's") {
  auto be = make_cpu_backend(2);
  for (bool with_shared : {false, true}) {
    CAPTURE(with_shared);
    const Fixture f(with_shared, true, 300);
    const MoeBlock block = f.block(*be);
    auto bytes = [](const LinearWeight& w) { return w.data.nbytes() + w.scales.nbytes() + w.zeros.nbytes(); };
    const uint64_t expert = bytes(block.experts[0].gate_up) + bytes(block.experts[0].down);
    const uint64_t fixed = bytes(block.router) +
                           (with_shared ? bytes(block.shared.gate_up) + bytes(block.shared.down) + bytes(block.shared_gate) : 0);
    std::mt19937 rng(9);
    std::normal_distribution<float> d(0.f, 1.f);
    for (int T : {1, 40}) {  // one token: k experts; 40 tokens: every expert of 6 (top 2)
      Tensor xh = Tensor::empty_host(DType::F32, {T, f.H});
      for (int64_t i = 0; i < xh.numel(); ++i) xh.ptr<float>()[i] = d(rng);
      Buffers buf(*be, T, f);
      (void)be->take_weight_bytes();
      block.run(*be, be->upload(xh, DType::F32), buf.s, buf.out);
      CHECK(be->take_weight_bytes() == fixed + uint64_t(T == 1 ? f.k : f.E) * expert);
    }
  }
}
