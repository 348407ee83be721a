#include "quant/algo/rtn.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

namespace llmctl::quant {

namespace {
// The signed range of compressed-tensors' int type: [-2^(bits-1), 2^(bits-1) - 1].
float signed_min(const QuantScheme& s) { return -float(1 << (s.bits - 1)); }
float signed_max(const QuantScheme& s) { return float((1 << (s.bits - 1)) - 1); }
}  // namespace

void group_qparams(float min, float max, const QuantScheme& s, float* scale, int32_t* zero) {
  const float qmin = signed_min(s), qmax = signed_max(s);
  const float range = qmax - qmin;
  min = std::min(min, 0.0f);
  max = std::max(max, 0.0f);
  float sc, zp;
  if (s.symmetric) {
    sc = std::max(std::fabs(min), std::fabs(max)) / (range / 2);
    zp = 0;
  } else {
    sc = (max - min) / range;
    // 0/0 for an all-zero group (NaN there); qmin is the limit of the formula for min = 0.
    zp = sc == 0 ? qmin : std::clamp(qmin - min / sc, qmin, qmax);
  }
  if (sc == 0) sc = FLT_EPSILON;
  *scale = sc;
  *zero = int32_t(std::nearbyint(zp)) - int32_t(qmin);  // half to even (default rounding mode)
}

uint8_t quantize_value(float w, float scale, int32_t zero, const QuantScheme& s) {
  const float qmin = signed_min(s), qmax = signed_max(s);
  const float scaled = w / scale + float(zero + int32_t(qmin));
  return uint8_t(int32_t(std::nearbyint(std::clamp(scaled, qmin, qmax))) - int32_t(qmin));
}

void rtn_qparams(const float* w, int64_t n, int64_t k, const QuantScheme& s, std::vector<float>& scales,
                 std::vector<int32_t>& zeros) {
  s.check(k);
  const int64_t g = s.groups(k), gs = k / g;
  scales.assign(size_t(n * g), 0.0f);
  zeros.assign(size_t(n * g), 0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t gi = 0; gi < g; ++gi) {
      const float* p = w + r * k + gi * gs;
      const auto [lo, hi] = std::minmax_element(p, p + gs);
      group_qparams(*lo, *hi, s, &scales[size_t(r * g + gi)], &zeros[size_t(r * g + gi)]);
    }
}

QuantizedLinear rtn_quantize(const float* w, int64_t n, int64_t k, const QuantScheme& s) {
  QuantizedLinear out;
  out.n = n;
  out.k = k;
  out.scheme = s;
  rtn_qparams(w, n, k, s, out.scales, out.zeros);
  const int64_t g = s.groups(k), gs = k / g;
  out.q.resize(size_t(n * k));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const size_t gi = size_t(r * g + c / gs);
      out.q[size_t(r * k + c)] = quantize_value(w[r * k + c], out.scales[gi], out.zeros[gi], s);
    }
  return out;
}

}  // namespace llmctl::quant
