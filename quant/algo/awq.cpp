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

AwqLayerReport awq_scale_layer(CalibrationForward& f, DenseLayer& L, const Tensor& x, const AwqOptions& o) {
  const ModelConfig& c = f.config();
  const int64_t H = c.hidden_size, A = int64_t(c.num_heads) * c.head_dim, I = c.intermediate_size;
  AwqLayerReport rep;
  // The unquantized layer on the search batch.
  Tensor attn_in = f.alloc(H), o_in = f.alloc(A), attn_out = f.alloc(H), mlp_in = f.alloc(H), down_in = f.alloc(I),
         mlp_out = f.alloc(H);
  f.norm(x, L.input_norm, attn_in);
  f.attention(L, attn_in, o_in);
  f.linear(o_in, L.o, nullptr, attn_out);
  Tensor h = clone(x);
  CalibrationForward::add(h, attn_out);
  f.norm(h, L.post_norm, mlp_in);
  f.gated_act(L, mlp_in, down_in);
  f.linear(down_in, L.down, nullptr, mlp_out);
  Tensor scratch_o = f.alloc(A), scratch_h = f.alloc(H), scratch_i = f.alloc(I);
  double loss0 = 0, loss = 0;

  // input_norm -> q, k, v; the loss on the self-attention output.
  {
    auto eval = [&](const std::vector<Tensor>& q) {
      DenseLayer T = L;
      T.q = q[0], T.k = q[1], T.v = q[2];
      f.attention(T, attn_in, scratch_o);
      f.linear(scratch_o, L.o, nullptr, scratch_h);
      return mse(scratch_h, attn_out);
    };
    std::vector<double> s = search_scales(column_abs_mean(attn_in), {&L.q, &L.k, &L.v}, o, eval, &rep.ratio_attn,
                                          &loss0, &loss);
    divide_rows(L.input_norm, s);
    for (Tensor* w : {&L.q, &L.k, &L.v}) scale_columns(*w, s, false);
  }
  // v -> o, only when v's outputs are o's inputs one to one (no GQA).
  if (L.v.dim(0) == L.o.dim(1)) {
    auto eval = [&](const std::vector<Tensor>& q) {
      f.linear(o_in, q[0], nullptr, scratch_h);
      return mse(scratch_h, attn_out);
    };
    std::vector<double> s = search_scales(column_abs_mean(o_in), {&L.o}, o, eval, &rep.ratio_o, &loss0, &loss);
    divide_rows(L.v, s);
    if (!L.v_bias.empty()) divide_rows(L.v_bias, s);
    scale_columns(L.o, s, false);
  }
  // post_norm -> gate, up; the loss on the MLP output.
  {
    auto eval = [&](const std::vector<Tensor>& q) {
      DenseLayer T = L;
      T.gate = q[0], T.up = q[1];
      f.gated_act(T, mlp_in, scratch_i);
      f.linear(scratch_i, L.down, nullptr, scratch_h);
      return mse(scratch_h, mlp_out);
    };
    std::vector<double> s =
        search_scales(column_abs_mean(mlp_in), {&L.gate, &L.up}, o, eval, &rep.ratio_mlp, &rep.loss_before, &rep.loss_after);
    divide_rows(L.post_norm, s);
    for (Tensor* w : {&L.gate, &L.up}) scale_columns(*w, s, false);
  }
  // up -> down; the loss on the down projection's output.
  {
    auto eval = [&](const std::vector<Tensor>& q) {
      f.linear(down_in, q[0], nullptr, scratch_h);
      return mse(scratch_h, mlp_out);
    };
    std::vector<double> s = search_scales(column_abs_mean(down_in), {&L.down}, o, eval, &rep.ratio_down, &loss0, &loss);
    divide_rows(L.up, s);
    scale_columns(L.down, s, false);
  }
  return rep;
}

void awq_clip_layer(CalibrationForward& f, DenseLayer& L, const Tensor& x, const AwqOptions& o) {
  if (o.max_shrink <= 0) return;
  const ModelConfig& c = f.config();
  const int64_t H = c.hidden_size, A = int64_t(c.num_heads) * c.head_dim, I = c.intermediate_size;
  // The inputs of each linear in the (scaled) layer.
  Tensor attn_in = f.alloc(H), o_in = f.alloc(A), attn_out = f.alloc(H), mlp_in = f.alloc(H), down_in = f.alloc(I);
  f.norm(x, L.input_norm, attn_in);
  f.attention(L, attn_in, o_in);
  f.linear(o_in, L.o, nullptr, attn_out);
  Tensor h = clone(x);
  CalibrationForward::add(h, attn_out);
  f.norm(h, L.post_norm, mlp_in);
  f.gated_act(L, mlp_in, down_in);
  clip_linear(L.v, attn_in, o);
  clip_linear(L.o, o_in, o);
  clip_linear(L.gate, mlp_in, o);
  clip_linear(L.up, mlp_in, o);
  clip_linear(L.down, down_in, o);
}

AwqLayerReport awq_layer(CalibrationForward& f, DenseLayer& L, const Tensor& x, const AwqOptions& o) {
  AwqLayerReport rep = awq_scale_layer(f, L, x, o);
  awq_clip_layer(f, L, x, o);
  return rep;
}

}  // namespace llmctl::quant
