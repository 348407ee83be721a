// The search qweight_factored.cpp and its AVX2 variant share (qlinear.h, ScaleType::Factored): the
// candidate D of a run of values in the order both try them, and the check a candidate passes before
// its values are tried. Each variant tries a candidate on the values its own way, with the same
// float operations, so both find the same D and m.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "kernels/scalar_types.h"

namespace llmctl::kernels::detail {

// D as an f16 (*h its bits) when it is one exactly, finite and not zero.
inline bool f16_candidate(float D, uint16_t* h) {
  uint32_t bits;
  std::memcpy(&bits, &D, 4);
  if ((bits & 0x1FFFu) != 0 && (bits & 0x7FFFFFFFu) >= 0x38800000u) return false;  // a normal f16 has 10 mantissa bits
  *h = f32_to_f16(D);
  const float back = f16_to_f32(*h);
  return std::memcmp(&back, &D, 4) == 0 && std::isfinite(D) && D != 0.0f;
}

// 1.5 x 2^23: (q + it) - it is q rounded to nearest even (|q| < 2^22), std::lrint's value without
// a library call.
constexpr float kFactorRound = 12582912.0f;

// The search over one run's values v[0, count): all zeros (D = +0, m = -1 for each -0), else
// try(D) for D = the largest value over m, m the ends llama.cpp's quantizers put their largest
// scale at (63 for Q4_K / Q5_K, -128 for Q6_K, -32 for Q3_K and IQ4_XS, 15 for Q2_K), then the hint
// (f16 bits, not zero: the row's previous run's D, which a super-block of two runs shares: Q6_K's
// and Q3_K's groups of 16, whose second run's largest scale is rarely at the end; Q6_K-like runs
// 90 -> 70 ns a run of 8 on an AVX2 EPYC), then every other int8. try(D) checks D (f16_candidate)
// and writes *d and m when every value is D * m.
template <class Try>
bool factor_search(const float* v, int count, uint16_t* d, int8_t* m, uint16_t hint, Try&& try_d) {
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
    if (try_d(v[imax] / float(c))) return true;
  if ((hint & 0x7FFFu) != 0 && try_d(f16_to_f32(hint))) return true;
  for (int c = 127; c >= -128; --c)
    if (c != 0 && try_d(v[imax] / float(c))) return true;
  return false;
}

// The AVX2 variant for a run of kFactoredGroups values (qweight_factored_avx2.cpp).
bool factor_values8_avx2(const float* v, uint16_t* d, int8_t* m, uint16_t hint = 0);
// The portable one for any count (qweight_factored.cpp): what factor_values runs elsewhere.
bool factor_values_scalar(const float* v, int count, uint16_t* d, int8_t* m, uint16_t hint = 0);

}  // namespace llmctl::kernels::detail
