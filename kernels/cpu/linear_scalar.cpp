// Portable fallback for linear_rows / dot_f32: 16 partial sums, combined in a fixed order.
#include <cstdint>
#include <cstring>

#include "kernels/scalar_types.h"  // header-only f16/bf16 conversions, shared with the engine
#include "kernels/cpu/linear_impl.h"

namespace llmctl::kernels::detail {

namespace {
template <class Load>
float dot_generic(const float* a, int64_t n, Load load) {
  float acc[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int l = 0; l < 16; ++l) acc[l] += a[i + l] * load(i + l);
  for (int l = 0; l < 8; ++l) acc[l] += acc[l + 8];
  for (int l = 0; l < 4; ++l) acc[l] += acc[l + 4];
  float s = (acc[0] + acc[2]) + (acc[1] + acc[3]);
  for (; i < n; ++i) s += a[i] * load(i);
  return s;
}
}  // namespace

float dot_f32_scalar(const float* a, const float* b, int64_t n) {
  return dot_generic(a, n, [b](int64_t i) { return b[i]; });
}

void linear_rows_scalar(const float* x, int64_t T, int64_t K, const void* w, WeightType wt, const float* bias,
                        int64_t n0, int64_t n1, float* out, int64_t ldo) {
  for (int64_t n = n0; n < n1; ++n) {
    for (int64_t t = 0; t < T; ++t) {
      const float* xr = x + t * K;
      float s;
      if (wt == WeightType::F32) {
        const float* wr = static_cast<const float*>(w) + n * K;
        s = dot_generic(xr, K, [wr](int64_t i) { return wr[i]; });
      } else {
        const uint16_t* wr = static_cast<const uint16_t*>(w) + n * K;
        if (wt == WeightType::BF16)
          s = dot_generic(xr, K, [wr](int64_t i) { return bf16_to_f32(wr[i]); });
        else
          s = dot_generic(xr, K, [wr](int64_t i) { return f16_to_f32(wr[i]); });
      }
      out[t * ldo + n] = bias ? s + bias[n] : s;
    }
  }
}

}  // namespace llmctl::kernels::detail
