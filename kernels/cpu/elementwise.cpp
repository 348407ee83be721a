#include "kernels/cpu/elementwise.h"

#include <cmath>

namespace llmctl::kernels {

void rms_norm_rows(const float* x, const float* w, float eps, int64_t H, int64_t r0, int64_t r1, float* out,
                   float* residual) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * H;
    float* o = out + r * H;
    const float* src = xr;
    if (residual) {
      float* res = residual + r * H;
      for (int64_t i = 0; i < H; ++i) res[i] += xr[i];
      src = res;
    }
    double ss = 0;
    for (int64_t i = 0; i < H; ++i) ss += double(src[i]) * src[i];
    const float inv = 1.0f / std::sqrt(float(ss / double(H)) + eps);
    for (int64_t i = 0; i < H; ++i) o[i] = w[i] * (src[i] * inv);
  }
}

void silu_mul_rows(const float* gate_up, int64_t I, int64_t r0, int64_t r1, float* out) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* g = gate_up + r * 2 * I;
    const float* u = g + I;
    float* o = out + r * I;
    for (int64_t i = 0; i < I; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  }
}

void rope_head(float* x, int64_t D, int32_t position, const float* inv_freq) {
  const int64_t half = D / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float angle = float(position) * inv_freq[i];
    const float c = std::cos(angle), s = std::sin(angle);
    const float a = x[i], b = x[i + half];
    x[i] = a * c - b * s;
    x[i + half] = b * c + a * s;
  }
}

}  // namespace llmctl::kernels
