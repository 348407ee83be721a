#include "quant/format/quantized_linear.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace llmctl::quant {

namespace {
std::string num(float v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", double(v));
  return b;
}
}  // namespace

std::string QuantScheme::label() const {
  return "int" + std::to_string(bits) + (group_size <= 0 ? " per-channel" : " g" + std::to_string(group_size)) +
         (symmetric ? " sym" : " asym");
}

void QuantScheme::check(int64_t k) const {
  if (bits != 4 && bits != 8) throw std::invalid_argument("bits must be 4 or 8, not " + std::to_string(bits));
  if (group_size == 0 || group_size < -1)
    throw std::invalid_argument("group size must be positive or -1 (per channel), not " + std::to_string(group_size));
  if (k <= 0) throw std::invalid_argument("a weight with " + std::to_string(k) + " input features");
  if (group_size > 0 && k % group_size != 0)
    throw std::invalid_argument("group size " + std::to_string(group_size) + " does not divide the " +
                                std::to_string(k) + " input features of this weight");
}

void QuantizedLinear::validate() const {
  scheme.check(k);
  if (n <= 0) throw std::invalid_argument("a weight with " + std::to_string(n) + " output features");
  const int64_t g = groups();
  if (q.size() != size_t(n * k)) throw std::invalid_argument("quantized codes: size does not match [N, K]");
  if (scales.size() != size_t(n * g) || zeros.size() != size_t(n * g))
    throw std::invalid_argument("scales/zeros: size does not match [N, groups]");
  if (!g_idx.empty() && g_idx.size() != size_t(k)) throw std::invalid_argument("g_idx: size does not match K");
  for (int32_t gi : g_idx)
    if (gi < 0 || gi >= g) throw std::invalid_argument("g_idx: group " + std::to_string(gi) + " out of range");
  const int max = scheme.max_code();
  for (uint8_t c : q)
    if (c > max) throw std::invalid_argument("quantized code " + std::to_string(c) + " exceeds " + std::to_string(max));
  for (int32_t z : zeros)
    if (z < 0 || z > max) throw std::invalid_argument("zero point " + std::to_string(z) + " out of range");
  if (scheme.symmetric)
    for (size_t i = 0; i < zeros.size(); ++i)
      if (zeros[i] != scheme.sym_zero())
        throw std::invalid_argument(
            "the config says symmetric, but the zero point of row " + std::to_string(int64_t(i) / g) + ", group " +
            std::to_string(int64_t(i) % g) + " is " + std::to_string(zeros[i]) + ", not " +
            std::to_string(scheme.sym_zero()) +
            (zeros[i] == scheme.sym_zero() + 1 ? " (zero points stored without GPTQ v1's minus one: a gptq_v2 file?)" : ""));
  const float max_scale = kMaxWeightMagnitude / float(max);
  for (size_t i = 0; i < scales.size(); ++i)
    if (!std::isfinite(scales[i]) || scales[i] < 0 || scales[i] > max_scale)
      throw std::invalid_argument("the scale of row " + std::to_string(int64_t(i) / g) + ", group " +
                                  std::to_string(int64_t(i) % g) + " is " + num(scales[i]) +
                                  " (a scale must be finite, >= 0 and at most " + num(max_scale) +
                                  ", or weights would exceed " + num(kMaxWeightMagnitude) + ")");
}

std::vector<float> dequantize(const QuantizedLinear& w) {
  std::vector<float> out(size_t(w.n * w.k));
  const int64_t g = w.groups();
  for (int64_t r = 0; r < w.n; ++r)
    for (int64_t c = 0; c < w.k; ++c) {
      const int64_t gi = r * g + w.group_of(c);
      out[size_t(r * w.k + c)] = float(int(w.q[size_t(r * w.k + c)]) - w.zeros[size_t(gi)]) * w.scales[size_t(gi)];
    }
  return out;
}

}  // namespace llmctl::quant
