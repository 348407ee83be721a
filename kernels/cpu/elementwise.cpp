#include "kernels/cpu/elementwise.h"

#include <cmath>
#include <vector>

#include "kernels/cpu/elementwise_impl.h"
#include "kernels/cpu/linear.h"

namespace llmctl::kernels {

void detail::rms_norm_rows_portable(const float* x, const float* w, float eps, int64_t H, int64_t r0, int64_t r1,
                                    float* out, float* residual) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * H;
    float* o = out + r * H;
    const float* src = xr;
    if (residual) {
      float* res = residual + r * H;
      for (int64_t i = 0; i < H; ++i) res[i] += xr[i];
      src = res;
    }
    double s[8] = {};
    for (int64_t i = 0; i < H; ++i) s[i % 8] += double(src[i]) * src[i];
    const double ss = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    const float inv = 1.0f / std::sqrt(float(ss / double(H)) + eps);
    for (int64_t i = 0; i < H; ++i) o[i] = w[i] * (src[i] * inv);
  }
}

void rms_norm_rows(const float* x, const float* w, float eps, int64_t H, int64_t r0, int64_t r1, float* out,
                   float* residual) {
  if (cpu_has_avx2()) return detail::rms_norm_rows_avx2(x, w, eps, H, r0, r1, out, residual);
  detail::rms_norm_rows_portable(x, w, eps, H, r0, r1, out, residual);
}

void head_rms_norm_rows(float* qkv, int64_t D, int64_t hq, int64_t hkv, const float* q_w, const float* k_w, float eps,
                        int64_t r0, int64_t r1) {
  const int64_t width = (hq + 2 * hkv) * D;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t h = 0; h < hq + hkv; ++h) {
      float* x = qkv + r * width + h * D;
      rms_norm_rows(x, h < hq ? q_w : k_w, eps, D, 0, 1, x, nullptr);  // in place: each value read before written
    }
}

void silu_mul_rows(const float* gate_up, int64_t I, int64_t r0, int64_t r1, float* out) {
  silu_mul_cols(gate_up, I, r0, r1, 0, I, out);
}

void silu_mul_cols(const float* gate_up, int64_t I, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* out) {
  if (cpu_has_avx2()) return detail::silu_mul_cols_avx2(gate_up, I, r0, r1, c0, c1, out);
  for (int64_t r = r0; r < r1; ++r) {
    const float* g = gate_up + r * 2 * I;
    const float* u = g + I;
    float* o = out + r * I;
    for (int64_t i = c0; i < c1; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  }
}

void detail::gelu_tanh_mul_cols_portable(const float* gate_up, int64_t I, int64_t r0, int64_t r1, int64_t c0,
                                         int64_t c1, float* out) {
  constexpr float kBeta = 0.7978845608028654f, kKappa = 0.044715f;  // sqrt(2 / pi)
  for (int64_t r = r0; r < r1; ++r) {
    const float* g = gate_up + r * 2 * I;
    const float* u = g + I;
    float* o = out + r * I;
    for (int64_t i = c0; i < c1; ++i) {
      const float x = g[i];
      o[i] = x / (1.0f + std::exp(-2.0f * (kBeta * (x + kKappa * x * x * x)))) * u[i];
    }
  }
}

void gelu_tanh_mul_rows(const float* gate_up, int64_t I, int64_t r0, int64_t r1, float* out) {
  gelu_tanh_mul_cols(gate_up, I, r0, r1, 0, I, out);
}

void gelu_tanh_mul_cols(const float* gate_up, int64_t I, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* out) {
  if (cpu_has_avx2()) return detail::gelu_tanh_mul_cols_avx2(gate_up, I, r0, r1, c0, c1, out);
  detail::gelu_tanh_mul_cols_portable(gate_up, I, r0, r1, c0, c1, out);
}

namespace {
// One head rotated by the angles' cosines c[D/2] and sines s[D/2].
void rotate_half(float* x, int64_t half, const float* c, const float* s) {
  for (int64_t i = 0; i < half; ++i) {
    const float a = x[i], b = x[i + half];
    x[i] = a * c[i] - b * s[i];
    x[i + half] = b * c[i] + a * s[i];
  }
}

void angles(int64_t half, int32_t position, const float* inv_freq, float scale, float* c, float* s) {
  for (int64_t i = 0; i < half; ++i) {
    const float angle = float(position) * inv_freq[i];
    c[i] = std::cos(angle) * scale;
    s[i] = std::sin(angle) * scale;
  }
}
}  // namespace

void rope_head(float* x, int64_t D, int32_t position, const float* inv_freq) { rope_heads(x, 1, D, position, inv_freq); }

void rope_heads(float* x, int64_t heads, int64_t D, int32_t position, const float* inv_freq, int64_t rotary_dim,
                float scale) {
  const int64_t half = (rotary_dim > 0 ? rotary_dim : D) / 2;
  thread_local std::vector<float> cs;
  cs.resize(size_t(2 * half));
  angles(half, position, inv_freq, scale, cs.data(), cs.data() + half);
  for (int64_t h = 0; h < heads; ++h) rotate_half(x + h * D, half, cs.data(), cs.data() + half);
}

}  // namespace llmctl::kernels
