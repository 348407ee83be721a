#include "engine/backend/cpu/vec_math.h"

#include <algorithm>
#include <bit>
#include <limits>

namespace llmctl {

namespace {
constexpr int kLanes = 16;
}

float exp_nonpositive(float x) {
  // No branches and no selects (they stop the vectorizer): out-of-range lanes are masked to 0.
  const uint32_t keep = 0u - uint32_t(x > -87.0f);  // all ones when -87 < x (false for -inf, NaN)
  const float t = x * 1.44269504088896341f;         // x / ln 2
  const float r = (t + 12582912.0f) - 12582912.0f;  // round to nearest (exact for |t| < 2^22)
  const float f = (t - r) * 0.693147180559945309f;  // remainder in [-ln2/2, ln2/2]
  // e^f by Taylor to degree 7 (error < 5e-9 on this interval).
  float p = 1.0f / 5040.0f;
  p = p * f + 1.0f / 720.0f;
  p = p * f + 1.0f / 120.0f;
  p = p * f + 1.0f / 24.0f;
  p = p * f + 1.0f / 6.0f;
  p = p * f + 0.5f;
  p = p * f + 1.0f;
  p = p * f + 1.0f;
  const int32_t ri = int32_t(t > -126.0f ? r : -126.0f);
  const uint32_t scale_bits = (uint32_t(ri + 127) << 23) & keep;  // 2^r, r >= -126
  return std::bit_cast<float>(std::bit_cast<uint32_t>(p * std::bit_cast<float>(scale_bits)) & keep);
}

float max_value(const float* x, int n) {
  float lane[kLanes];
  std::fill(lane, lane + kLanes, -std::numeric_limits<float>::infinity());
  int i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
  float m = -std::numeric_limits<float>::infinity();
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  for (int j = 0; j < kLanes; ++j) m = lane[j] > m ? lane[j] : m;
  return m;
}

namespace {
constexpr int kChunk = 512;

void exp_block(const float* __restrict x, int n, float shift, float scale, float* __restrict out) {
  for (int i = 0; i < n; ++i) out[i] = exp_nonpositive((x[i] - shift) * scale);
}
}  // namespace

double exp_shifted(const float* x, int n, float shift, float scale, float* out) {
  float buf[kChunk];
  double lane[kLanes] = {};
  double sum = 0;
  for (int base = 0; base < n; base += kChunk) {
    const int m = std::min(kChunk, n - base);
    float* e = out ? out + base : buf;
    exp_block(x + base, m, shift, scale, e);
    int i = 0;
    for (; i + kLanes <= m; i += kLanes)
      for (int j = 0; j < kLanes; ++j) lane[j] += double(e[i + j]);
    for (; i < m; ++i) sum += e[i];
  }
  for (int j = 0; j < kLanes; ++j) sum += lane[j];
  return sum;
}

}  // namespace llmctl
