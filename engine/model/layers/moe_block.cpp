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
  const int64_t T = x.dim(0), H = x.dim(1);
  const int E = int(experts.size());
  Tensor logits = first_rows(s.router_logits, T);
  be.linear(x, router, nullptr, logits);
  const Tensor host_logits = be.to_host_f32(logits);
  const MoeRouting r = route_tokens(host_logits.ptr<float>(), T, E, top_k, renormalize);
  // The routed rows in expert order: expert e's tokens at [begin[e], begin[e] + n_e).
  std::vector<int32_t> rows;
  std::vector<float> weights;
  std::vector<int64_t> begin(size_t(E) + 1, 0);
  for (int e = 0; e < E; ++e) {
    rows.insert(rows.end(), r.tokens[size_t(e)].begin(), r.tokens[size_t(e)].end());
    weights.insert(weights.end(), r.weights[size_t(e)].begin(), r.weights[size_t(e)].end());
    begin[size_t(e) + 1] = int64_t(rows.size());
  }
  const int64_t n = int64_t(rows.size());  // T k
  const int64_t I2 = experts[0].gate_up.n, I = experts[0].down.k;
  Tensor in = GatedMlp::scratch(s.rows_in, n, H), y = GatedMlp::scratch(s.rows_out, n, H);
  Tensor gu = GatedMlp::scratch(s.gate_up, n, I2), act = GatedMlp::scratch(s.act, n, I);
  be.gather_token_rows(x, rows, in);
  std::vector<Backend::GroupedLinear> up, down;
  for (int e = 0; e < E; ++e) {
    const int64_t b0 = begin[size_t(e)], b1 = begin[size_t(e) + 1];
    if (b0 == b1) continue;
    const GatedMlp& m = experts[size_t(e)];
    LLM_CHECK(m.gate_up.n == I2 && m.down.k == I && m.gelu_tanh == experts[0].gelu_tanh)
        << "MoE block: expert " << e << " differs in shape or activation from expert 0";
    up.push_back({row_slice(in, b0, b1 - b0), &m.gate_up, row_slice(gu, b0, b1 - b0)});
    down.push_back({row_slice(act, b0, b1 - b0), &m.down, row_slice(y, b0, b1 - b0)});
  }
  be.linear_group(up);
  experts[0].activate(be, gu, act);  // every expert's activation is expert 0's (checked above)
  be.linear_group(down);
  be.fill_zero(out);
  be.scatter_add_rows(y, rows, weights, out);  // in expert order: each token's sum always adds in the same order
  if (shared.gate_up.n > 0) {
    Tensor y = GatedMlp::scratch(s.rows_out, T, H);
    shared.run(be, x, s.shared_gate_up, s.shared_act, y);
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
