#include "engine/model/layers/moe_block.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/core/error.h"
#include "engine/model/model.h"

namespace llmctl {

MoeRouting route_tokens(const float* logits, int64_t T, int E, int k, bool renormalize) {
  LLM_CHECK(k >= 1 && k <= E) << "route_tokens: top " << k << " of " << E << " experts";
  MoeRouting r;
  r.tokens.resize(size_t(E));
  r.weights.resize(size_t(E));
  std::vector<float> p(static_cast<size_t>(E));
  std::vector<int> order(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    const float* l = logits + t * E;
    // softmax in double, as the max-subtracted sum is where precision goes
    const float m = *std::max_element(l, l + E);
    double sum = 0;
    for (int e = 0; e < E; ++e) sum += p[size_t(e)] = float(std::exp(double(l[e]) - double(m)));
    for (int e = 0; e < E; ++e) p[size_t(e)] = float(p[size_t(e)] / sum);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
      return p[size_t(a)] > p[size_t(b)] || (p[size_t(a)] == p[size_t(b)] && a < b);
    });
    double chosen = 0;
    for (int j = 0; j < k; ++j) chosen += p[size_t(order[size_t(j)])];
    for (int j = 0; j < k; ++j) {
      const int e = order[size_t(j)];
      r.tokens[size_t(e)].push_back(int32_t(t));
      r.weights[size_t(e)].push_back(renormalize ? float(p[size_t(e)] / chosen) : p[size_t(e)]);
    }
  }
  return r;
}

void MoeBlock::run(Backend& be, const Tensor& x, Scratch& s, Tensor& out) const {
  const int64_t T = x.dim(0);
  const int E = int(experts.size());
  Tensor logits = first_rows(s.router_logits, T);
  be.linear(x, router, nullptr, logits);
  const Tensor host_logits = be.to_host_f32(logits);
  const MoeRouting r = route_tokens(host_logits.ptr<float>(), T, E, top_k, renormalize);
  be.fill_zero(out);
  for (int e = 0; e < E; ++e) {  // in expert order: each token's sum always adds in the same order
    const auto& toks = r.tokens[size_t(e)];
    if (toks.empty()) continue;
    const int64_t n = int64_t(toks.size());
    Tensor in = first_rows(s.rows_in, n), y = first_rows(s.rows_out, n), gu = first_rows(s.gate_up, n), act = first_rows(s.act, n);
    be.gather_token_rows(x, toks, in);
    experts[size_t(e)].run(be, in, gu, act, y);
    be.scatter_add_rows(y, toks, r.weights[size_t(e)], out);
  }
  if (shared.gate_up.n > 0) {
    Tensor y = first_rows(s.rows_out, T), gu = first_rows(s.gate_up, T), act = first_rows(s.act, T);
    shared.run(be, x, gu, act, y);
    Tensor g = Tensor::view(s.router_logits.data, DType::F32, {T, 1}, s.router_logits.owner);  // its first T floats
    be.linear(x, shared_gate, nullptr, g);
    const Tensor host_g = be.to_host_f32(g);
    std::vector<int32_t> all(static_cast<size_t>(T));
    std::vector<float> w(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) {
      all[size_t(t)] = int32_t(t);
      w[size_t(t)] = 1.0f / (1.0f + std::exp(-host_g.ptr<float>()[t]));
    }
    be.scatter_add_rows(y, all, w, out);
  }
}

}  // namespace llmctl
