// fp8 e4m3 ("e4m3fn", OCP FP8 / NVIDIA's __nv_fp8_e4m3): 1 sign, 4 exponent (bias 7), 3 mantissa
// bits; no infinities, NaN = S.1111.111, largest finite +-448, smallest subnormal 2^-9. Shared by
// kernels on every backend (host code here; the CUDA kernels of the quantized-kernels issue use the
// hardware conversion, which rounds the same way).
#pragma once
#include <cstdint>
#include <cstring>

namespace llmctl {

inline constexpr float kFp8E4m3Max = 448.0f;

// Round to nearest, ties to even; |x| >= 448 (and +-inf) saturates to +-448; NaN gives +0 (a NaN
// code is never produced).
inline uint8_t f32_to_fp8_e4m3(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint8_t sign = uint8_t((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0;              // NaN
  if (a >= 0x43e00000u) return sign | 0x7eu;  // >= 448 (and inf): saturate
  if (a < 0x3c800000u) {                      // below 2^-6: subnormal codes, steps of 2^-9
    // a * 2^9 < 8 is exact in f32; round its mantissa to an integer, ties to even.
    float f;
    std::memcpy(&f, &a, 4);
    const float s = f * 512.0f;
    uint32_t q = uint32_t(s);  // floor
    const float rem = s - float(q);
    if (rem > 0.5f || (rem == 0.5f && (q & 1u))) ++q;
    return sign | uint8_t(q);  // q == 8 is the smallest normal, 0x08
  }
  // Normal: rebias the exponent (127 -> 7) and round the 23-bit mantissa to 3 bits; a carry
  // moves into the exponent, and below 448 it never reaches the NaN code.
  const uint32_t v = a - ((127u - 7u) << 23);
  const uint32_t r = (v + 0x7ffffu + ((v >> 20) & 1u)) >> 20;
  return sign | uint8_t(r);
}

inline float fp8_e4m3_to_f32(uint8_t c) {
  const uint32_t sign = uint32_t(c & 0x80u) << 24, e = (c >> 3) & 0xfu, m = c & 7u;
  uint32_t u;
  if (e == 15 && m == 7) {
    u = sign | 0x7fc00000u;  // NaN
  } else if (e == 0) {       // subnormal (or zero): m * 2^-9, exact in f32
    float f = float(m) * (1.0f / 512.0f);
    std::memcpy(&u, &f, 4);
    u |= sign;
  } else {
    u = sign | (e + 127u - 7u) << 23 | m << 20;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace llmctl
