// Helpers for the parity table's cases: random inputs rounded to the dtype the backend sees (the
// references use exactly those values), NaN-poisoned outputs, copies back to the host.
#pragma once
#include <cmath>
#include <random>
#include <vector>

#include "backend_ops_table.h"
#include "engine/core/dtype.h"
#include "engine/core/tensor.h"

namespace llmctl::backend_ops {

inline float round_to(DType dt, float v) {
  if (dt == DType::BF16) return bf16_to_f32(f32_to_bf16(v));
  if (dt == DType::F16) return f16_to_f32(f32_to_f16(v));
  return v;
}

// A tensor on the backend in `dt` holding uniform values in [lo, hi) (never exactly zero), and the
// same values on the host as f32 after rounding to `dt`.
struct Rand {
  Tensor dev;
  std::vector<float> f;
};
inline Rand random_tensor(Ctx& c, DType dt, std::vector<int64_t> shape, float lo = -1.f, float hi = 1.f) {
  Tensor h = Tensor::empty_host(DType::F32, shape);
  std::uniform_real_distribution<float> u(lo, hi);
  Rand r;
  r.f.resize(size_t(h.numel()));
  for (int64_t i = 0; i < h.numel(); ++i) {
    float v = u(c.rng);
    if (round_to(dt, v) == 0.f) v = 0.5f * hi;
    r.f[size_t(i)] = round_to(dt, v);
    h.ptr<float>()[i] = r.f[size_t(i)];
  }
  r.dev = c.be.upload(h, dt);
  return r;
}

// A tensor on the backend whose every element is NaN, so that an output the op does not write shows.
inline Tensor poisoned(Ctx& c, DType dt, std::vector<int64_t> shape) {
  Tensor h = Tensor::empty_host(DType::F32, shape);
  for (int64_t i = 0; i < h.numel(); ++i) h.ptr<float>()[i] = NAN;
  return c.be.upload(h, dt);
}

inline std::vector<float> to_vec(Ctx& c, const Tensor& t) {
  c.be.synchronize();
  Tensor h = c.be.to_host_f32(t);
  return std::vector<float>(h.ptr<float>(), h.ptr<float>() + h.numel());
}

inline std::vector<double> widen(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

// Rotary frequencies for head_dim D, written out here (not the model's code) for the variants.
// LongRope: short factors 1 + i/8 below position 4096, long factors 2 + i from it. Partial: plain
// rope over the first D/4 dimensions of each head (the rest pass through).
enum class RopeKind { None, Linear, Llama3, LongRope, Partial };
inline RopeParams rope_params(RopeKind kind, int D, double theta) {
  RopeParams p;
  p.head_dim = D;
  if (kind == RopeKind::Partial) p.rotary_dim = D / 4;
  const int R = p.rotary();
  for (int i = 0; i < R / 2; ++i) {
    double f = 1.0 / std::pow(theta, 2.0 * i / R);
    if (kind == RopeKind::Linear) f /= 4.0;  // factor 4
    if (kind == RopeKind::Llama3) {          // factor 8, low 1, high 4, original context 8192
      const double wavelen = 2 * M_PI / f, low_wavelen = 8192.0 / 1.0, high_wavelen = 8192.0 / 4.0;
      if (wavelen > low_wavelen) f /= 8.0;
      else if (wavelen >= high_wavelen) {
        const double smooth = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
        f = (1 - smooth) * f / 8.0 + smooth * f;
      }
    }
    p.inv_freq.push_back(float(kind == RopeKind::LongRope ? f / (1.0 + i / 8.0) : f));
    if (kind == RopeKind::LongRope) p.inv_freq_long.push_back(float(f / (2.0 + i)));
  }
  if (kind == RopeKind::LongRope) p.long_from = 4096;
  if (kind == RopeKind::LongRope || kind == RopeKind::Partial) p.attention_scaling = 1.25f;  // YaRN's / LongRoPE's
  return p;
}


// Reference rotation (HF rotate-half) of the q and k heads of qkv [T, (Hq + 2 Hkv) D]; v untouched.
// The angle is the f32 product pos * inv_freq, as every backend forms it.
inline std::vector<double> rope_reference(const std::vector<float>& qkv, const std::vector<int32_t>& pos,
                                   const RopeParams& p, int Hq, int Hkv) {
  const int D = p.head_dim, R = p.rotary(), W = (Hq + 2 * Hkv) * D, T = int(pos.size());
  std::vector<double> ref = widen(qkv);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < Hq + Hkv; ++h)
      for (int i = 0; i < R / 2; ++i) {
        const bool long_freq = p.long_from > 0 && pos[size_t(t)] >= p.long_from;
        const double a = double(float(pos[size_t(t)]) * (long_freq ? p.inv_freq_long : p.inv_freq)[size_t(i)]);
        const size_t x1 = size_t(t) * W + size_t(h) * D + i, x2 = x1 + R / 2;
        const double m = p.attention_scaling;
        ref[x1] = (qkv[x1] * std::cos(a) - qkv[x2] * std::sin(a)) * m;
        ref[x2] = (qkv[x2] * std::cos(a) + qkv[x1] * std::sin(a)) * m;
      }
  return ref;
}

}  // namespace llmctl::backend_ops

namespace llmctl::backend_ops {
// The table's rows, by file: backend_ops_dense.cpp, backend_ops_kv.cpp, backend_ops_sample.cpp.
void add_dense_cases(std::vector<OpCase>& t);
void add_kv_cases(std::vector<OpCase>& t);
void add_kv_quant_cases(std::vector<OpCase>& t);
void add_sample_cases(std::vector<OpCase>& t);
void add_moe_cases(std::vector<OpCase>& t);
}  // namespace llmctl::backend_ops

namespace llmctl::backend_ops {
inline bool contains(const std::vector<DType>& v, DType d) {
  for (DType x : v)
    if (x == d) return true;
  return false;
}
}  // namespace llmctl::backend_ops
