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

#include "kernels/cpu/linear.h"
#include "kernels/cpu/qlinear_impl.h"
#include "kernels/cpu/qweight_factored_impl.h"

namespace llmctl::kernels {

namespace detail {

bool factor_values_scalar(const float* v, int count, uint16_t* d, int8_t* m, uint16_t hint) {
  return factor_search(v, count, d, m, hint, [&](float D) {
    uint16_t h;
    if (!f16_candidate(D, &h)) return false;
    const float inv = 1.0f / D;  // q only picks the candidate m: the product check below decides
    for (int i = 0; i < count; ++i) {
      const float q = v[i] * inv;
      if (!(q >= -128.5f && q <= 127.5f)) return false;  // also NaN
      const int c = int((q + kFactorRound) - kFactorRound);
      const float back = D * float(c);
      if (c < -128 || c > 127 || std::memcmp(&back, &v[i], 4) != 0) return false;
      m[i] = int8_t(c);
    }
    *d = h;
    return true;
  });
}

bool factor_values(const float* v, int count, uint16_t* d, int8_t* m, uint16_t hint) {
  if (count == kFactoredGroups && cpu_has_avx2()) return factor_values8_avx2(v, d, m, hint);
  return factor_values_scalar(v, count, d, m, hint);
}

}  // namespace detail

bool qweight_factor(int64_t n, int64_t k, int group, const float* v, FactoredParams* out) {
  constexpr int64_t R = detail::kFactoredGroups;
  if (group <= 0 || k % group != 0 || (k / group) % R != 0) return false;
  const int64_t count = n * (k / group);
  out->m.resize(size_t(count));
  out->d.resize(size_t(count / R));
  const int64_t per_row = k / group;
  for (int64_t i = 0; i < count; i += R) {
    // the row's previous run's D as the search's hint (factor_search)
    const uint16_t hint = i % per_row ? out->d[size_t(i / R - 1)] : uint16_t(0);
    if (!detail::factor_values(v + i, int(R), &out->d[size_t(i / R)], &out->m[size_t(i)], hint)) return false;
  }
  return true;
}

bool qweight_factored_ok(QLayout layout) {
  return layout == QLayout::RowLane16 || std::strcmp(qlinear_isa(), "avx512-vnni") != 0;
}

}  // namespace llmctl::kernels
