// Shared by the quantized-kernel tests (test_qlinear.cpp, test_qweight_codebook.cpp): random
// group-affine weights in both layouts with a double reference, activations, the variants this CPU
// runs.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/backend/cpu/cpu_quantized_weight.h"
#include "engine/core/dtype.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/qlinear.h"
#include "kernels/cpu/qlinear_impl.h"

namespace llmctl::qtest {

using kernels::ScaleType;


struct Variant {
  const char* name;
  decltype(&kernels::detail::qlinear_rows_f32_scalar) f32;
  decltype(&kernels::detail::qlinear_rows_q8_scalar) q8;
};

inline std::vector<Variant> variants() {
  std::vector<Variant> v = {{"scalar", kernels::detail::qlinear_rows_f32_scalar, kernels::detail::qlinear_rows_q8_scalar}};
  if (kernels::cpu_has_avx2())
    v.push_back({"avx2", kernels::detail::qlinear_rows_f32_avx2, kernels::detail::qlinear_rows_q8_avx2});
  else
    MESSAGE("this CPU has no AVX2/FMA/F16C: the avx2 variant is not tested here");
  if (kernels::detail::cpu_has_avx512_vnni())
    v.push_back({"avx512", kernels::detail::qlinear_rows_f32_avx512, kernels::detail::qlinear_rows_q8_avx512});
  else
    MESSAGE("this CPU has no AVX-512 VNNI: the avx512 variant is not tested here");
  return v;
}

// A random group-affine weight: codes (one per byte), scales/offsets (f16 bits or f32), packed.
struct QW {
  int bits, group;
  int64_t n, k;
  ScaleType st;
  std::vector<uint8_t> codes, packed;
  std::vector<float> scale_f32, offset_f32;      // the values the kernels see (f16-rounded for F16)
  std::vector<uint16_t> scale_f16, offset_f16;
  kernels::QLayout layout = kernels::QLayout::Rows;
  int implied_zero = -1;  // RowLane16 packed without offsets (they are -z * scale)
  // F32 and Factored (which packs f32 values as their factors) take the f32 arrays.
  const void* scales() const { return st == ScaleType::F16 ? static_cast<const void*>(scale_f16.data()) : scale_f32.data(); }
  const void* offsets() const { return st == ScaleType::F16 ? static_cast<const void*>(offset_f16.data()) : offset_f32.data(); }
  kernels::QWeightView view() const {
    kernels::QWeightView v;
    v.bits = bits, v.n = n, v.k = k, v.group = group, v.packed = packed.data(), v.scale_type = st, v.layout = layout;
    v.implied_zero = implied_zero;
    if (layout == kernels::QLayout::Rows) v.scale = scales(), v.offset = offsets();  // RowLane16: inside packed
    return v;
  }
  // The same weight packed in the other layout (RowLane16 needs group % 32 == 0).
  QW as(kernels::QLayout l, int zero = -1) const {
    QW q = *this;
    q.layout = l;
    q.implied_zero = zero;
    if (l == kernels::QLayout::Rows) {
      q.packed.assign(size_t(n * kernels::qweight_row_bytes(bits, k)), 0);
      kernels::qweight_pack(bits, n, k, codes.data(), q.packed.data());
    } else {
      q.packed.assign(size_t((n + 15) / 16 * kernels::qweight_rowlane_block_bytes(bits, k, group, st, zero)), 0xEE);
      kernels::qweight_pack_rowlane(bits, n, k, group, st, codes.data(), scales(), offsets(), q.packed.data(), zero);
    }
    return q;
  }
  double w(int64_t r, int64_t c) const {
    const int code = bits <= 4 ? int(codes[r * k + c]) : int(int8_t(codes[r * k + c]));
    const int64_t g = r * (k / group) + c / group;
    return double(scale_f32[g]) * code + double(offset_f32[g]);
  }
};

inline QW make_qw(int bits, int group, int64_t n, int64_t k, ScaleType st, uint32_t seed) {
  std::mt19937 rng(seed);
  QW q{bits, group, n, k, st, {}, {}, {}, {}, {}, {}};
  q.codes.resize(size_t(n * k));
  std::uniform_int_distribution<int> c2(0, 3), c3(0, 7), c4(0, 15), c8(-128, 127);
  for (auto& c : q.codes)
    c = bits == 2   ? uint8_t(c2(rng))
        : bits == 3 ? uint8_t(c3(rng))
        : bits == 4 ? uint8_t(c4(rng))
                    : uint8_t(int8_t(c8(rng)));
  if (bits != 2 && bits != 3) {  // 2- and 3-bit codes: the row-lane layout only (as(RowLane16))
    q.packed.resize(size_t(n * kernels::qweight_row_bytes(bits, k)));
    kernels::qweight_pack(bits, n, k, q.codes.data(), q.packed.data());
  }
  const int64_t G = n * (k / group);
  std::uniform_real_distribution<float> sd(0.002f, 0.05f), od(-0.3f, 0.3f);
  std::bernoulli_distribution neg(0.3);
  for (int64_t i = 0; i < G; ++i) {
    float s = sd(rng) * (neg(rng) ? -1.f : 1.f), o = od(rng);
    if (st == ScaleType::F16) {
      q.scale_f16.push_back(f32_to_f16(s)), q.offset_f16.push_back(f32_to_f16(o));
      s = f16_to_f32(q.scale_f16.back()), o = f16_to_f32(q.offset_f16.back());
    }
    q.scale_f32.push_back(s), q.offset_f32.push_back(o);
  }
  return q;
}

inline std::vector<float> randn(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng) + (d(rng) > 2.5f ? 6.0f : 0.0f);  // a few outliers, as real activations have
  return v;
}

struct ActBuf {
  std::vector<uint8_t> raw;
  kernels::QActivations q;
  ActBuf(const float* x, int64_t T, int64_t K) : raw(kernels::qactivation_bytes(T, K) + 64) {
    void* p = raw.data() + (64 - reinterpret_cast<uintptr_t>(raw.data()) % 64) % 64;
    q = kernels::quantize_activations(x, T, K, p);
  }
  double deq(int64_t t, int64_t k) const { return double(q.q[t * q.k + k]) * q.scale[(t * q.k + k) / 32]; }
};

// x's tiles of `rows` tokens (16: AMX's, whole tiles; 4: the AVX-512 and AVX2 tiles', padded, with
// the int16 ones), as the quantizer writes them where those kernels run, and x's view with them.
struct TileBuf {
  std::vector<int8_t> q;
  std::vector<float> scale, sum;
  std::vector<int32_t> half, wc;
  std::vector<int16_t> q16;
  kernels::QActivations view;
  TileBuf(const kernels::QActivations& x, int rows) : view(x) {
    const int64_t end = rows == 16 ? x.t / 16 * 16 : (x.t + 3) / 4 * 4;
    q.assign(size_t(end * x.k), 0x5A), scale.assign(size_t(end * x.k / 32), NAN);
    sum.assign(size_t(end * x.k / 16), NAN), half.assign(size_t(end * x.k / 16), -7);
    if (rows == 4) q16.assign(size_t(end * x.k), -9), wc.assign(size_t(end * x.k / 32), -7);
    kernels::detail::qact_write_tiles(x, 0, rows == 16 ? end : x.t, rows, q.data(), scale.data(), sum.data(),
                                      half.data(), rows == 4 ? q16.data() : nullptr, rows == 4 ? wc.data() : nullptr);
    view.tile_rows = rows, view.tile_q = q.data(), view.tile_scale = scale.data(), view.tile_sum = sum.data();
    view.tile_half_sum = half.data();
    if (rows == 4) view.tile_q16 = q16.data(), view.tile_wc = wc.data();
  }
};
// x without tiles (each kernel builds its own).
inline kernels::QActivations without_tiles(kernels::QActivations x) {
  x.tile_rows = 0, x.tile_q = nullptr, x.tile_scale = nullptr, x.tile_sum = nullptr, x.tile_half_sum = nullptr;
  x.tile_q16 = nullptr, x.tile_wc = nullptr;
  return x;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

// K-quant-like f32 parameters: scales d x sc and offsets -(dmin x m) (z = 0: all -0) per run of 8
// groups: d, dmin f16 (some negative, some subnormal, some 0), sc in -128..127 on odd rows
// (Q6_K-like), 0..63 on even ones, m 0..63 (0 gives -0).
inline void kquant_params(QW& q, int z, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t G = q.k / q.group;
  for (int64_t r = 0; r < q.n; ++r)
    for (int64_t g0 = 0; g0 < G; g0 += 8) {
      const float d = f16_to_f32(f32_to_f16((rng() % 3 ? 1e-3f : 3e-7f) * float(int(rng() % 200) - 100) / 37.0f));
      const float dmin = f16_to_f32(f32_to_f16(1e-2f * float(rng() % 1000) / 1000.0f));
      for (int64_t g = g0; g < g0 + 8; ++g) {
        const int sc = r % 2 ? int(rng() % 256) - 128 : int(rng() % 64), m = int(rng() % 64);
        q.scale_f32[size_t(r * G + g)] = d * float(sc);
        q.offset_f32[size_t(r * G + g)] = z == 0 ? -0.0f : -(dmin * float(m));
      }
    }
}

// q as the loader's canonical Int4Group / Int8Group weight: codes one per byte (code_dtype U8, or I8
// for 8 bits), f32 scales and offsets (q's f32 values).
inline LinearWeight canonical_weight(const QW& q, DType code_dtype = DType::U8) {
  LinearWeight c;
  c.format = q.bits <= 4 ? WeightFormat::Int4Group : WeightFormat::Int8Group;
  c.n = q.n, c.k = q.k, c.group_size = q.group;
  c.data = Tensor::empty_host(code_dtype, {q.n, q.k});
  std::memcpy(c.data.data, q.codes.data(), q.codes.size());
  c.scales = Tensor::empty_host(DType::F32, {q.n, q.k / q.group});
  c.zeros = Tensor::empty_host(DType::F32, {q.n, q.k / q.group});
  std::memcpy(c.scales.data, q.scale_f32.data(), c.scales.nbytes());
  std::memcpy(c.zeros.data, q.offset_f32.data(), c.zeros.nbytes());
  return c;
}

// Two packings of one weight that differ only in its last row (made so that one of them cannot take
// a compact form): their outputs on every other row, T random tokens, through the dispatched kernels.
struct OutputsButLast {
  std::vector<float> q8_a, q8_b, f32_a, f32_b;
};
inline OutputsButLast outputs_but_last_row(const kernels::QWeightView& a, const kernels::QWeightView& b, int64_t T,
                                           uint32_t seed) {
  const int64_t N = a.n, K = a.k;
  const auto x = randn(size_t(T * K), seed);
  const ActBuf act(x.data(), T, K);
  OutputsButLast o{std::vector<float>(size_t(T * N)), std::vector<float>(size_t(T * N)),
                   std::vector<float>(size_t(T * N)), std::vector<float>(size_t(T * N))};
  kernels::qlinear_rows_q8(act.q, a, nullptr, 0, N - 1, o.q8_a.data(), N);
  kernels::qlinear_rows_q8(act.q, b, nullptr, 0, N - 1, o.q8_b.data(), N);
  kernels::qlinear_rows_f32(x.data(), T, a, nullptr, 0, N - 1, o.f32_a.data(), N);
  kernels::qlinear_rows_f32(x.data(), T, b, nullptr, 0, N - 1, o.f32_b.data(), N);
  return o;
}

}  // namespace llmctl::qtest
