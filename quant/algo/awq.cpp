#include "quant/algo/awq.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/core/error.h"
#include "engine/core/thread_pool.h"
#include "quant/algo/rtn.h"

namespace llmctl::quant {

namespace {

// mean over rows of |x| per column: x [T, K] -> [K]
std::vector<double> column_abs_mean(const Tensor& x) {
  const int64_t T = x.dim(0), K = x.dim(1);
  std::vector<double> m(size_t(K), 0.0);
  const float* p = x.ptr<float>();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k) m[size_t(k)] += std::fabs(p[t * K + k]);
  for (double& v : m) v /= double(T);
  return m;
}

// Per input column, the mean over the rows of all ws of |W| / max|W| within its group.
std::vector<double> weight_group_mean(const std::vector<const Tensor*>& ws, const QuantScheme& s) {
  const int64_t K = ws[0]->dim(1);
  const int64_t gs = s.group_size <= 0 ? K : s.group_size;
  std::vector<double> m(size_t(K), 0.0);
  int64_t rows = 0;
  for (const Tensor* w : ws) {
    const float* p = w->ptr<float>();
    for (int64_t n = 0; n < w->dim(0); ++n, ++rows)
      for (int64_t g0 = 0; g0 < K; g0 += gs) {
        float mx = 0;
        for (int64_t k = g0; k < g0 + gs; ++k) mx = std::max(mx, std::fabs(p[n * K + k]));
        for (int64_t k = g0; k < g0 + gs; ++k) m[size_t(k)] += std::fabs(p[n * K + k]) / (double(mx) + 1e-6);
      }
  }
  for (double& v : m) v /= double(rows);
  return m;
}

double mse(const Tensor& a, const Tensor& b) {
  double sum = 0;
  const float *x = a.ptr<float>(), *y = b.ptr<float>();
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = double(x[i]) - double(y[i]);
    sum += d * d;
  }
  return sum / double(a.numel());
}

Tensor clone(const Tensor& t) {
  Tensor out = Tensor::empty_host(DType::F32, t.shape);
  std::memcpy(out.data, t.data, t.nbytes());
  return out;
}

// w[:, k] *= s[k] (or /= when divide)
void scale_columns(Tensor& w, const std::vector<double>& s, bool divide) {
  const int64_t N = w.dim(0), K = w.dim(1);
  float* p = w.ptr<float>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) p[n * K + k] = float(divide ? p[n * K + k] / s[size_t(k)] : p[n * K + k] * s[size_t(k)]);
}

// A norm's weight w [H] run as (offset + w): the weight whose (offset + w') is (offset + w) / s.
void divide_norm(Tensor& w, const std::vector<double>& s, float offset) {
  float* p = w.ptr<float>();
  for (int64_t r = 0; r < w.dim(0); ++r) p[r] = float((double(offset) + p[r]) / s[size_t(r)] - double(offset));
}

// w[r, :] /= s[r] for a [R, *] tensor or w[r] /= s[r] for a vector
void divide_rows(Tensor& w, const std::vector<double>& s) {
  const int64_t R = w.dim(0), C = w.rank() > 1 ? w.dim(1) : 1;
  float* p = w.ptr<float>();
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) p[r * C + c] = float(p[r * C + c] / s[size_t(r)]);
}

// Q(W * s) / s
Tensor fake_quantize_scaled(const Tensor& w, const std::vector<double>& s, const QuantScheme& qs) {
  Tensor scaled = clone(w);
  scale_columns(scaled, s, false);
  Tensor out = Tensor::empty_host(DType::F32, w.shape);
  fake_quantize(scaled.ptr<float>(), w.dim(0), w.dim(1), qs, out.ptr<float>());
  scale_columns(out, s, true);
  return out;
}

// llm-compressor's grid of (ratio, duo scaling): with duo scaling, the identity (0, no duo) and
// then grid - 1 ratios from 0 to 1 inclusive; without, grid ratios from 0 to 1 inclusive.
std::vector<std::pair<double, bool>> awq_grid(const AwqOptions& o) {
  LLM_CHECK(o.grid >= 3) << "AWQ grid of " << o.grid << " points";
  std::vector<std::pair<double, bool>> g;
  if (o.duo_scaling) {
    g.emplace_back(0.0, false);
    for (int i = 0; i < o.grid - 1; ++i) g.emplace_back(double(i) / (o.grid - 2), true);
  } else {
    for (int i = 0; i < o.grid; ++i) g.emplace_back(double(i) / (o.grid - 1), false);
  }
  return g;
}

// The grid search of one smoothing pair: returns the best scales (and its ratio) for the weights
// `ws`, whose fp input statistics are x_mean; eval(quantized weights) gives the parent's loss.
template <class Eval>
std::vector<double> search_scales(const std::vector<double>& x_mean, const std::vector<Tensor*>& ws,
                                  const AwqOptions& o, Eval eval, double* best_ratio, double* loss_at_zero,
                                  double* best_loss) {
  std::vector<const Tensor*> cws(ws.begin(), ws.end());
  const std::vector<double> w_mean = weight_group_mean(cws, o.scheme);
  const size_t K = x_mean.size();
  const std::vector<std::pair<double, bool>> grid = awq_grid(o);
  std::vector<double> best;
  *best_loss = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < grid.size(); ++i) {
    const auto [r, duo] = grid[i];
    std::vector<double> s(K);
    double mx = 0, mn = std::numeric_limits<double>::infinity();
    for (size_t k = 0; k < K; ++k) {
      s[k] = duo ? std::pow(x_mean[k], r) / (std::pow(w_mean[k], 1 - r) + 1e-4) : std::pow(x_mean[k], r);
      s[k] = std::max(s[k], 1e-4);
      mx = std::max(mx, s[k]);
      mn = std::min(mn, s[k]);
    }
    const double norm = std::sqrt(mx * mn);
    for (double& v : s) v /= norm;
    std::vector<Tensor> q;
    for (Tensor* w : ws) q.push_back(fake_quantize_scaled(*w, s, o.scheme));
    const double loss = eval(q);
    if (i == 0) *loss_at_zero = loss;
    if (loss < *best_loss) {
      *best_loss = loss;
      *best_ratio = r;
      best = s;
    }
  }
  LLM_CHECK(!best.empty()) << "AWQ: every grid point gave a non-finite loss";
  return best;
}

// AWQ's clipping search for one linear w [N, K] on input rows x [T, K] (a strided subset of
// clip_tokens rows). The error of a candidate for (row n, group g) is the squared difference of
// the group's partial outputs over those rows, sum_t (x_t . (q - w))^2 = d^T (X_g^T X_g) d with
// d = q - w: the Gram matrix of each group's inputs is formed once and shared by all rows.
void clip_linear(Tensor& w, const Tensor& x, const AwqOptions& o) {
  const int64_t N = w.dim(0), K = w.dim(1), T = x.dim(0);
  const int64_t gs = o.scheme.group_size <= 0 ? K : o.scheme.group_size, G = K / gs;
  const int64_t step = std::max<int64_t>(1, T / o.clip_tokens);
  std::vector<int64_t> rows;
  for (int64_t t = 0; t < T && int64_t(rows.size()) < o.clip_tokens; t += step) rows.push_back(t);
  const float* xp = x.ptr<float>();
  // gram[g] = X_g^T X_g, [gs, gs] per group
  std::vector<double> gram(size_t(G * gs * gs), 0.0);
  ThreadPool::global().parallel_for(G, [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      double* m = gram.data() + g * gs * gs;
      for (int64_t t : rows) {
        const float* xr = xp + t * K + g * gs;
        for (int64_t i = 0; i < gs; ++i)
          for (int64_t j = 0; j <= i; ++j) m[i * gs + j] += double(xr[i]) * xr[j];
      }
      for (int64_t i = 0; i < gs; ++i)
        for (int64_t j = 0; j < i; ++j) m[j * gs + i] = m[i * gs + j];
    }
  });
  float* wp = w.ptr<float>();
  const int steps = int(o.max_shrink * o.clip_grid);
  ThreadPool::global().parallel_for(N, [&](int64_t n0, int64_t n1) {
    std::vector<double> d(static_cast<size_t>(gs));
    for (int64_t n = n0; n < n1; ++n)
      for (int64_t g = 0; g < G; ++g) {
        float* wg = wp + n * K + g * gs;
        const double* m = gram.data() + g * gs * gs;
        float org_max = 0;
        for (int64_t j = 0; j < gs; ++j) org_max = std::max(org_max, std::fabs(wg[j]));
        double best_err = std::numeric_limits<double>::infinity();
        float best_max = org_max;
        for (int i = 0; i < steps; ++i) {
          const float mx = org_max * (1.0f - float(i) / float(o.clip_grid));
          // the group clamped to [-mx, mx], fake-quantized on its own min/max
          float lo = std::numeric_limits<float>::infinity(), hi = -lo;
          for (int64_t j = 0; j < gs; ++j) {
            const float c = std::clamp(wg[j], -mx, mx);
            lo = std::min(lo, c);
            hi = std::max(hi, c);
          }
          float scale = 0;
          int32_t zero = 0;
          group_qparams(lo, hi, o.scheme, &scale, &zero);
          for (int64_t j = 0; j < gs; ++j) {
            const float c = std::clamp(wg[j], -mx, mx);
            const float q = float(int(quantize_value(c, scale, zero, o.scheme)) - zero) * scale;
            d[size_t(j)] = double(q) - double(wg[j]);
          }
          double err = 0;
          for (int64_t a = 0; a < gs; ++a) {
            double row = 0;
            for (int64_t b = 0; b < gs; ++b) row += m[a * gs + b] * d[size_t(b)];
            err += d[size_t(a)] * row;
          }
          if (err < best_err) {
            best_err = err;
            best_max = mx;
          }
        }
        for (int64_t j = 0; j < gs; ++j) wg[j] = std::clamp(wg[j], -best_max, best_max);
      }
  });
}

}  // namespace

void fake_quantize(const float* w, int64_t n, int64_t k, const QuantScheme& s, float* out) {
  const std::vector<float> d = dequantize(rtn_quantize(w, n, k, s));
  std::memcpy(out, d.data(), d.size() * sizeof(float));
}

namespace {
// x with column k divided by s[k] (x [T, K]): a linear's input once the op before it was divided by s.
Tensor divide_columns(const Tensor& x, const std::vector<double>& s) {
  Tensor out = clone(x);
  scale_columns(out, s, true);
  return out;
}
}  // namespace

AwqInputs awq_inputs(FamilyCalibration& f) {
  AwqInputs in;
  f.probe(
      [&](LinearSite site, const Tensor& x, const Tensor&) {
          const LinearGroup g = site.group;
        Tensor* slot[] = {&in.attn_in, &in.o_in, &in.mlp_in, &in.down_in};
        *slot[int(g)] = clone(x);
        return Tensor{};
      },
      LinearGroup::Down, FamilyCalibration::ProbeAttention::Record);  // the MLP probes replay it
  return in;
}

AwqLayerReport awq_scale_layer(FamilyCalibration& f, DenseLayer& L, AwqInputs& in, const AwqOptions& o) {
  // The quantizer's layer (written out) and the family's (run here) must be the same weights.
  const Tensor qkv = stack_rows({&L.q, &L.k, &L.v}), gate_up = stack_rows({&L.gate, &L.up});
  for (const auto& [g, mine] : {std::pair<LinearGroup, const Tensor*>{LinearGroup::Qkv, &qkv}, {LinearGroup::O, &L.o},
                                {LinearGroup::GateUp, &gate_up}, {LinearGroup::Down, &L.down}})
    LLM_CHECK(f.weight({g}).shape == mine->shape && std::memcmp(f.weight({g}).data, mine->data, mine->nbytes()) == 0)
        << "AWQ: the family's linear group " << int(g) << " " << f.weight({g}).shape_str()
        << " is not the checkpoint's layer weight " << mine->shape_str();
  AwqLayerReport rep;
  // The unquantized layer's outputs on the search batch: self-attention (o's) and MLP (down's).
  const Tensor attn_out = f.linear(in.o_in, L.o), mlp_out = f.linear(in.down_in, L.down);
  double loss0 = 0, loss = 0;
  // Group `swapped` run with weight w: the input of group `downstream` (the layer up to there; with
  // gate/up swapped, the attention half is the recorded one of awq_inputs).
  auto input_with = [&](LinearGroup swapped, const Tensor& w, LinearGroup downstream) {
    Tensor got;
    f.probe(
        [&](LinearSite site, const Tensor& x, const Tensor&) {
          const LinearGroup g = site.group;
          if (g == downstream) got = clone(x);
          return g == swapped ? w : Tensor{};
        },
        downstream,
        swapped == LinearGroup::GateUp ? FamilyCalibration::ProbeAttention::Replay
                                       : FamilyCalibration::ProbeAttention::Compute);
    return got;
  };
  std::vector<double> s_attn, s_o, s_mlp, s_down;

  // input_norm -> q, k, v; the loss on the self-attention output (the family's attention: rope,
  // q/k norms, window, soft-capping as it runs).
  {
    auto eval = [&](const std::vector<Tensor>& q) {
      const Tensor fused = stack_rows({&q[0], &q[1], &q[2]});
      return mse(f.linear(input_with(LinearGroup::Qkv, fused, LinearGroup::O), L.o), attn_out);
    };
    s_attn = search_scales(column_abs_mean(in.attn_in), {&L.q, &L.k, &L.v}, o, eval, &rep.ratio_attn, &loss0, &loss);
    divide_norm(L.input_norm, s_attn, L.norm_offset);
    for (Tensor* w : {&L.q, &L.k, &L.v}) scale_columns(*w, s_attn, false);
  }
  // v -> o, only when v's outputs are o's inputs one to one (no GQA).
  if (L.v.dim(0) == L.o.dim(1)) {
    auto eval = [&](const std::vector<Tensor>& q) { return mse(f.linear(in.o_in, q[0]), attn_out); };
    s_o = search_scales(column_abs_mean(in.o_in), {&L.o}, o, eval, &rep.ratio_o, &loss0, &loss);
    divide_rows(L.v, s_o);
    if (!L.v_bias.empty()) divide_rows(L.v_bias, s_o);
    scale_columns(L.o, s_o, false);
  }
  // the MLP's input norm -> gate, up; the loss on the MLP output (the family's activation; before a
  // norm after it, as the MLP module's output).
  {
    auto eval = [&](const std::vector<Tensor>& q) {
      const Tensor fused = stack_rows({&q[0], &q[1]});
      return mse(f.linear(input_with(LinearGroup::GateUp, fused, LinearGroup::Down), L.down), mlp_out);
    };
    s_mlp = search_scales(column_abs_mean(in.mlp_in), {&L.gate, &L.up}, o, eval, &rep.ratio_mlp, &rep.loss_before,
                          &rep.loss_after);
    divide_norm(L.mlp_norm, s_mlp, L.norm_offset);
    for (Tensor* w : {&L.gate, &L.up}) scale_columns(*w, s_mlp, false);
  }
  // up -> down; the loss on the down projection's output.
  {
    auto eval = [&](const std::vector<Tensor>& q) { return mse(f.linear(in.down_in, q[0]), mlp_out); };
    s_down = search_scales(column_abs_mean(in.down_in), {&L.down}, o, eval, &rep.ratio_down, &loss0, &loss);
    divide_rows(L.up, s_down);
    scale_columns(L.down, s_down, false);
  }
  // What the scaled layer's linears read: each input divided by the scales folded before it.
  in.attn_in = divide_columns(in.attn_in, s_attn);
  if (!s_o.empty()) in.o_in = divide_columns(in.o_in, s_o);
  in.mlp_in = divide_columns(in.mlp_in, s_mlp);
  in.down_in = divide_columns(in.down_in, s_down);
  return rep;
}

void awq_clip_layer(DenseLayer& L, const AwqInputs& in, const AwqOptions& o) {
  if (o.max_shrink <= 0) return;
  clip_linear(L.v, in.attn_in, o);
  clip_linear(L.o, in.o_in, o);
  clip_linear(L.gate, in.mlp_in, o);
  clip_linear(L.up, in.mlp_in, o);
  clip_linear(L.down, in.down_in, o);
}

}  // namespace llmctl::quant
