// The variants behind attention.h's paged_attention_head (internal), and the scalar pieces of the
// order they share.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/attention.h"

namespace llmctl::kernels::detail {

// e^x for x <= 0 (a score minus the maximum), the SIMD variants' operations one lane at a time:
// n = nearest integer to x * log2(e); r = x - n * ln2 in two fma steps (ln2 split into a high part
// exact in float and the rest); e^r by Horner over the degree-7 Taylor polynomial (error below
// 1e-8 relative for |r| <= ln2 / 2, under float's rounding); times 2^n built in the exponent bits.
// Below -87 the result is 0 (e^-87 is near float's smallest normal); NaN stays NaN.
struct ExpConstants {
  static constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693145751953125f,
                         kLn2Lo = 1.42860682030941723e-6f, kMin = -87.0f;
  // 1/7!, 1/6!, ..., 1/2!, 1, 1: Horner's coefficients from the top
  static constexpr float kPoly[8] = {1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};
};

inline float attention_exp(float x) {
  using C = ExpConstants;
  if (std::isnan(x)) return x;
  if (x < C::kMin) return 0.0f;
  const float n = std::nearbyint(x * C::kLog2e);
  float r = std::fma(n, -C::kLn2Hi, x);
  r = std::fma(n, -C::kLn2Lo, r);
  float p = C::kPoly[0];
  for (int i = 1; i < 8; ++i) p = std::fma(p, r, C::kPoly[i]);
  const uint32_t bits = uint32_t(int32_t(n) + 127) << 23;  // 2^n, n in [-126, 0]
  float two_n;
  std::memcpy(&two_n, &bits, 4);
  return p * two_n;
}

// The cache rows of keys 0, 1, 2, ... of one kv head, in order, without a division per key.
class KvRowCursor {
 public:
  KvRowCursor(const float* base, const PagedKvView& c, const int32_t* block_table, int64_t kvh)
      : base_(base + kvh * c.head_dim), table_(block_table), B_(c.block_size), stride_(c.num_kv_heads * c.head_dim) {}
  const float* next() {
    const float* row = base_ + (int64_t(table_[block_]) * B_ + offset_) * stride_;
    if (++offset_ == B_) offset_ = 0, ++block_;
    return row;
  }

 private:
  const float* base_;
  const int32_t* table_;
  int64_t B_, stride_, block_ = 0, offset_ = 0;
};

// P0 + P1 + P2 + P3 in the order attention.h gives (float scores, double denominators).
template <class T>
inline T tree16(const T* a) {
  T p[4];
  for (int L = 0; L < 4; ++L) p[L] = (a[4 * L] + a[4 * L + 2]) + (a[4 * L + 1] + a[4 * L + 3]);
  return (p[0] + p[1]) + (p[2] + p[3]);
}

// The portable kernel (any head_dim).
void paged_attention_head_portable(const float* q, const PagedKvView& c, const int32_t* block_table, int32_t position,
                                   int64_t kvh, float scale, float* scores, float* out);

// AVX2/FMA (head_dim 32, 64, 96, 128) and AVX-512 (multiples of 16 up to 128); they return false,
// doing nothing, for other sizes. The portable kernel's results bit for bit. Call only where
// cpu_has_avx2() (kernels/cpu/linear.h) / cpu_has_avx512_vnni() (kernels/cpu/qlinear_impl.h).
bool paged_attention_head_avx2(const float* q, const PagedKvView& c, const int32_t* block_table, int32_t position,
                               int64_t kvh, float scale, float* scores, float* out);
bool paged_attention_head_avx512(const float* q, const PagedKvView& c, const int32_t* block_table, int32_t position,
                                 int64_t kvh, float scale, float* scores, float* out);

}  // namespace llmctl::kernels::detail
