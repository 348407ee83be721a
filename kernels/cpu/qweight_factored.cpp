// Factored scales (qlinear.h, ScaleType::Factored): finding, for one row's run of groups, an f16 D
// and int8 multipliers m with D * float(m) equal to each f32 value bit for bit. A GGUF K-quant's
// sub-block scale is d * sc (d f16, sc at most 8 bits: the product is exact in f32), so v / sc
// recovers d exactly once sc is known; the largest value's sc is what llama.cpp's quantizers put at
// the end of their range (63 for Q4_K / Q5_K, -128 for Q6_K, -32 for Q3_K and IQ4_XS, 15 for Q2_K),
// tried first, then every int8. Only a verified D is ever used, so a wrong guess costs time, never a
// value.
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/qlinear_impl.h"

namespace llmctl::kernels {

namespace detail {

namespace {

bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

// D (an f16 value) with m[i] = round(v[i] / D) reproducing every v[i].
bool try_multiplier(const float* v, int count, float D, uint16_t* d, int8_t* m) {
  uint32_t bits;
  std::memcpy(&bits, &D, 4);
  if ((bits & 0x1FFFu) != 0 && (bits & 0x7FFFFFFFu) >= 0x38800000u) return false;  // a normal f16 has 10 mantissa bits
  const uint16_t h = f32_to_f16(D);
  if (!same_bits(f16_to_f32(h), D) || !std::isfinite(D) || D == 0.0f) return false;
  const float inv = 1.0f / D;  // q only picks the candidate m: the product check below decides
  constexpr float kRound = 12582912.0f;  // 1.5 x 2^23: (q + it) - it is q rounded to nearest even
  for (int i = 0; i < count; ++i) {
    const float q = v[i] * inv;
    if (!(q >= -128.5f && q <= 127.5f)) return false;  // also NaN
    const int c = int((q + kRound) - kRound);  // std::lrint's value, without a library call
    if (c < -128 || c > 127 || !same_bits(D * float(c), v[i])) return false;
    m[i] = int8_t(c);
  }
  *d = h;
  return true;
}

}  // namespace

bool factor_values(const float* v, int count, uint16_t* d, int8_t* m) {
  int imax = 0;
  for (int i = 0; i < count; ++i) {
    if (!std::isfinite(v[i])) return false;
    if (std::fabs(v[i]) > std::fabs(v[imax])) imax = i;
  }
  if (v[imax] == 0.0f) {  // all zeros (d = 0 in the file, or no offsets): D = +0, and +0 x -1 is -0
    *d = 0;
    for (int i = 0; i < count; ++i) m[i] = int8_t(std::signbit(v[i]) ? -1 : 0);
    return true;
  }
  for (int c : {63, -128, -32, 15, 127, 31, -64})
    if (try_multiplier(v, count, v[imax] / float(c), d, m)) return true;
  for (int c = 127; c >= -128; --c)
    if (c != 0 && try_multiplier(v, count, v[imax] / float(c), d, m)) return true;
  return false;
}

}  // namespace detail

bool qweight_factor(int64_t n, int64_t k, int group, const float* v, FactoredParams* out) {
  constexpr int64_t R = detail::kFactoredGroups;
  if (group <= 0 || k % group != 0 || (k / group) % R != 0) return false;
  const int64_t count = n * (k / group);
  out->m.resize(size_t(count));
  out->d.resize(size_t(count / R));
  for (int64_t i = 0; i < count; i += R)
    if (!detail::factor_values(v + i, int(R), &out->d[size_t(i / R)], &out->m[size_t(i)])) return false;
  return true;
}

bool qweight_factored_ok(QLayout layout) {
  return layout == QLayout::RowLane16 || std::strcmp(qlinear_isa(), "avx512-vnni") != 0;
}

}  // namespace llmctl::kernels
