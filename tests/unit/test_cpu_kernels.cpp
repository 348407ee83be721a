// CPU kernels against naive double-precision references on random inputs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/dtype.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_impl.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/elementwise_impl.h"
#include "kernels/cpu/elementwise_impl.h"
#include "kernels/cpu/kv_quant.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/linear_impl.h"
#include "kernels/cpu/qlinear_impl.h"
#include "tests/unit/attention_test_util.h"
#include "tests/unit/skip.h"

using namespace llmctl;
using test::QuantizedKv;
using test::randn;

TEST_CASE("linear_rows matches a double reference for f32, bf16 and f16 weights") {
  for (int64_t K : {1, 15, 16, 17, 64, 576, 1000}) {
    const int64_t T = 7, N = 23;
    auto x = randn(T * K, 1 + K), w = randn(N * K, 2 + K, 0.5f), bias = randn(N, 3);
    std::vector<uint16_t> wb(N * K), wh(N * K);
    for (int64_t i = 0; i < N * K; ++i) {
      wb[i] = f32_to_bf16(w[i]);
      wh[i] = f32_to_f16(w[i]);
    }
    struct Case {
      kernels::WeightType wt;
      const void* data;
      float (*load)(const void*, int64_t);
    } cases[] = {
        {kernels::WeightType::F32, w.data(), [](const void* p, int64_t i) { return static_cast<const float*>(p)[i]; }},
        {kernels::WeightType::BF16, wb.data(),
         [](const void* p, int64_t i) { return bf16_to_f32(static_cast<const uint16_t*>(p)[i]); }},
        {kernels::WeightType::F16, wh.data(),
         [](const void* p, int64_t i) { return f16_to_f32(static_cast<const uint16_t*>(p)[i]); }},
    };
    for (const auto& c : cases) {
      std::vector<float> out(T * N, NAN);
      kernels::linear_rows(x.data(), T, K, c.data, c.wt, bias.data(), 0, N, out.data(), N);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t n = 0; n < N; ++n) {
          double ref = bias[n], mag = 0;
          for (int64_t k = 0; k < K; ++k) {
            ref += double(x[t * K + k]) * c.load(c.data, n * K + k);
            mag += std::fabs(double(x[t * K + k]) * c.load(c.data, n * K + k));
          }
          CHECK(std::fabs(out[t * N + n] - ref) <= 1e-5 * (mag + 1));
        }
    }
  }
}

TEST_CASE("linear_rows gives bit-identical rows whatever the batch size or row split") {
  const int64_t K = 577, N = 40, T = 9;
  auto x = randn(T * K, 11), w = randn(N * K, 12);
  std::vector<float> all(T * N), solo(N);
  kernels::linear_rows(x.data(), T, K, w.data(), kernels::WeightType::F32, nullptr, 0, N, all.data(), N);
  for (int64_t t = 0; t < T; ++t) {
    kernels::linear_rows(x.data() + t * K, 1, K, w.data(), kernels::WeightType::F32, nullptr, 0, 17, solo.data(), N);
    kernels::linear_rows(x.data() + t * K, 1, K, w.data(), kernels::WeightType::F32, nullptr, 17, N, solo.data(), N);
    for (int64_t n = 0; n < N; ++n) CHECK(solo[n] == all[t * N + n]);
  }
}

TEST_CASE("the scalar fallback agrees with the dispatched (SIMD) kernel") {
  const int64_t K = 579, N = 19, T = 6;
  auto x = randn(T * K, 51), w = randn(N * K, 52);
  std::vector<uint16_t> wb(N * K);
  for (int64_t i = 0; i < N * K; ++i) wb[i] = f32_to_bf16(w[i]);
  std::vector<float> a(T * N), b(T * N);
  for (auto [wt, data] : {std::pair{kernels::WeightType::F32, (const void*)w.data()},
                          std::pair{kernels::WeightType::BF16, (const void*)wb.data()}}) {
    kernels::linear_rows(x.data(), T, K, data, wt, nullptr, 0, N, a.data(), N);
    kernels::detail::linear_rows_scalar(x.data(), T, K, data, wt, nullptr, 0, N, b.data(), N);
    for (int64_t i = 0; i < T * N; ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-5));
  }
  CHECK(kernels::detail::dot_f32_scalar(x.data(), w.data(), K) == doctest::Approx(kernels::dot_f32(x.data(), w.data(), K)).epsilon(1e-5));
}

TEST_CASE("the KV cursors give key j's slot table[j / B] * B + j % B and its row, from any first key") {
  const std::vector<int32_t> table = {7, 2, 9, 0, 5, 3};
  for (int64_t B : {1, 3, 16})
    for (int32_t first : {0, 1, 2, 5, 16, 17}) {
      if (first >= int64_t(table.size()) * B) continue;
      CAPTURE(B);
      CAPTURE(first);
      const int64_t H = 3, D = 4, kvh = 2;
      std::vector<float> cache(size_t(10 * B * H * D));
      const kernels::PagedKvView view{cache.data(), cache.data(), B, H, D};
      kernels::detail::KvSlotCursor slots(table.data(), B, first);
      kernels::detail::KvRowCursor rows(cache.data(), view, table.data(), kvh, first);
      for (int64_t j = first; j < int64_t(table.size()) * B; ++j) {
        const int64_t slot = int64_t(table[size_t(j / B)]) * B + j % B;
        CHECK(slots.next() == slot);
        CHECK(rows.next() == cache.data() + (slot * H + kvh) * D);
      }
    }
}

TEST_CASE("rms_norm with and without the fused residual add") {
  const int64_t H = 300, R = 5;
  auto x = randn(R * H, 21), w = randn(H, 22), res = randn(R * H, 23);
  auto res_before = res;
  std::vector<float> out(R * H), out2(R * H);
  kernels::rms_norm_rows(x.data(), w.data(), 1e-5f, H, 0, R, out.data(), nullptr);
  kernels::rms_norm_rows(x.data(), w.data(), 1e-5f, H, 0, R, out2.data(), res.data());
  for (int64_t r = 0; r < R; ++r) {
    double ss = 0, ss2 = 0;
    for (int64_t i = 0; i < H; ++i) {
      ss += double(x[r * H + i]) * x[r * H + i];
      double s = double(x[r * H + i]) + res_before[r * H + i];
      ss2 += s * s;
      CHECK(res[r * H + i] == doctest::Approx(s).epsilon(1e-6));
    }
    for (int64_t i = 0; i < H; ++i) {
      CHECK(out[r * H + i] == doctest::Approx(x[r * H + i] / std::sqrt(ss / H + 1e-5) * w[i]).epsilon(1e-5));
      double s = double(x[r * H + i]) + res_before[r * H + i];
      CHECK(out2[r * H + i] == doctest::Approx(s / std::sqrt(ss2 / H + 1e-5) * w[i]).epsilon(1e-5));
    }
  }
}

TEST_CASE("rms_norm: the AVX2 variant gives the portable one's bits (row tails, the fused residual add)") {
  if (!kernels::cpu_has_avx2()) LLMCTL_SKIP("this CPU has no AVX2/FMA/F16C");
  for (int64_t H : {1, 7, 8, 9, 64, 300, 576, 1027})
    for (bool with_residual : {false, true}) {
      const int64_t R = 3;
      const auto x = randn(R * H, uint32_t(40 + H), 3.0f), w = randn(H, uint32_t(41 + H)),
                 res0 = randn(R * H, uint32_t(42 + H));
      std::vector<float> a(size_t(R * H), NAN), b = a, ra = res0, rb = res0;
      kernels::detail::rms_norm_rows_portable(x.data(), w.data(), 1e-6f, H, 0, R, a.data(), with_residual ? ra.data() : nullptr);
      kernels::detail::rms_norm_rows_avx2(x.data(), w.data(), 1e-6f, H, 0, R, b.data(), with_residual ? rb.data() : nullptr);
      INFO("H " << H << " residual " << with_residual);
      CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
      CHECK(std::memcmp(ra.data(), rb.data(), ra.size() * 4) == 0);
      // and the norm itself, against one chain of double additions (within float rounding)
      for (int64_t r = 0; r < R; ++r) {
        const float* src = with_residual ? ra.data() + r * H : x.data() + r * H;
        double ss = 0;
        for (int64_t i = 0; i < H; ++i) ss += double(src[i]) * src[i];
        const float inv = 1.0f / std::sqrt(float(ss / double(H)) + 1e-6f);
        for (int64_t i = 0; i < H; ++i) CHECK(a[size_t(r * H + i)] == doctest::Approx(w[size_t(i)] * (src[i] * inv)).epsilon(1e-6));
      }
    }
}

TEST_CASE("silu_mul and rope against their definitions") {
  const int64_t I = 33;
  auto gu = randn(2 * 2 * I, 31, 3.0f);
  std::vector<float> out(2 * I);
  kernels::silu_mul_rows(gu.data(), I, 0, 2, out.data());
  for (int r = 0; r < 2; ++r)
    for (int64_t i = 0; i < I; ++i) {
      double g = gu[r * 2 * I + i], u = gu[r * 2 * I + I + i];
      CHECK(out[r * I + i] == doctest::Approx(g / (1 + std::exp(-g)) * u).epsilon(1e-5));
    }
  const int64_t D = 64;
  auto head = randn(D, 32);
  std::vector<float> inv(D / 2);
  for (int i = 0; i < D / 2; ++i) inv[i] = 1.0f / std::pow(10000.0f, 2.0f * i / D);
  auto rotated = head;
  kernels::rope_head(rotated.data(), D, 1234, inv.data());
  double n0 = 0, n1 = 0;
  for (int64_t i = 0; i < D / 2; ++i) {
    double a = double(1234.0f * inv[i]);
    CHECK(rotated[i] == doctest::Approx(head[i] * std::cos(a) - head[i + D / 2] * std::sin(a)).epsilon(1e-4));
    n0 += head[i] * head[i] + head[i + D / 2] * head[i + D / 2];
    n1 += rotated[i] * rotated[i] + rotated[i + D / 2] * rotated[i + D / 2];
  }
  CHECK(n1 == doctest::Approx(n0).epsilon(1e-5));  // a rotation keeps the norm
  // rope_heads: several heads of one token, each bit for bit rope_head's
  const int64_t heads = 5;
  auto many = randn(heads * D, 33, 2.0f);
  auto each = many;
  kernels::rope_heads(many.data(), heads, D, 777, inv.data());
  for (int64_t h = 0; h < heads; ++h) kernels::rope_head(each.data() + h * D, D, 777, inv.data());
  CHECK(std::memcmp(many.data(), each.data(), many.size() * sizeof(float)) == 0);
}

// A gated activation's columns in pieces (cols(r0, r1, c0, c1, out): rows [r0, r1), columns [c0, c1))
// give `whole`'s bytes, each piece writing its columns alone: cut at 0, 3, 8 and 13 columns, at a
// third of the row, and each row apart.
template <class Cols>
bool columns_split_alike(int64_t I, int64_t R, const std::vector<float>& whole, Cols cols) {
  std::vector<float> split(size_t(R * I), NAN);
  std::vector<int64_t> cuts = {0};
  for (int64_t c : {int64_t(3), int64_t(8), int64_t(13), I / 3 + 1})
    if (c > cuts.back() && c < I) cuts.push_back(c);
  cuts.push_back(I);
  for (int64_t r = 0; r < R; ++r)
    for (size_t p = 0; p + 1 < cuts.size(); ++p) cols(r, r + 1, cuts[p], cuts[p + 1], split.data());
  return std::memcmp(split.data(), whole.data(), whole.size() * sizeof(float)) == 0;
}

TEST_CASE("silu_mul over every range of inputs, row tails included, against double") {
  // Row lengths with and without a partial vector; gates from tiny to beyond e^x's float range
  // (|g| > 88: e^-g clamped), so every path of the vector exp is reached.
  for (int64_t I : {1, 7, 8, 9, 64, 1536 + 5}) {
    const int64_t R = 3;
    auto gu = randn(size_t(R * 2 * I), uint32_t(50 + I), 4.0f);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t i = 0; i < I; i += 3) gu[size_t(r * 2 * I + i)] *= float(1 << (i % 7 * 3));  // up to x 2^18
    std::vector<float> out(size_t(R * I), NAN), one(size_t(2 * I), NAN);
    kernels::silu_mul_rows(gu.data(), I, 0, R, out.data());
    int bad = 0;
    for (int64_t r = 0; r < R; ++r)
      for (int64_t i = 0; i < I; ++i) {
        const double g = gu[size_t(r * 2 * I + i)], u = gu[size_t(r * 2 * I + I + i)];
        const double want = g / (1 + std::exp(-g)) * u, got = out[size_t(r * I + i)];
        if (!(std::fabs(got - want) <= 1e-6 * std::fabs(want) + 1e-30)) ++bad;
      }
    CHECK(bad == 0);
    kernels::silu_mul_rows(gu.data(), I, 1, 2, one.data());  // row 1 alone: the same bytes
    CHECK(std::memcmp(one.data() + I, out.data() + I, size_t(I) * sizeof(float)) == 0);
    CHECK(columns_split_alike(I, R, out, [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* o) {
      kernels::silu_mul_cols(gu.data(), I, r0, r1, c0, c1, o);
    }));
  }
}

TEST_CASE("gelu_tanh_mul over every range of inputs, row tails included, against double") {
  // GeGLU's tanh GELU (elementwise.h), the variant this CPU runs and the portable one: gates from tiny
  // to where e^(-2a) leaves float's range both ways, rows with and without a partial vector.
  for (int64_t I : {1, 7, 8, 9, 64, 6912 + 3}) {
    const int64_t R = 3;
    auto gu = randn(size_t(R * 2 * I), uint32_t(70 + I), 3.0f);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t i = 0; i < I; i += 3) gu[size_t(r * 2 * I + i)] *= float(1 << (i % 5 * 2));  // up to x 256
    std::vector<float> out(size_t(R * I), NAN), one(size_t(2 * I), NAN), portable(size_t(R * I), NAN);
    kernels::gelu_tanh_mul_rows(gu.data(), I, 0, R, out.data());
    kernels::detail::gelu_tanh_mul_cols_portable(gu.data(), I, 0, R, 0, I, portable.data());
    for (const std::vector<float>* o : {&out, &portable}) {
      int bad = 0;
      double worst = 0;
      for (int64_t r = 0; r < R; ++r)
        for (int64_t i = 0; i < I; ++i) {
          const double g = gu[size_t(r * 2 * I + i)], u = gu[size_t(r * 2 * I + I + i)];
          const double a = 0.7978845608028654 * (g + 0.044715 * g * g * g);
          // 0.5 g (1 + tanh(a)) without the cancellation of 1 + tanh(a) for a << 0 (in double too)
          const double want = g / (1 + std::exp(-2 * a)) * u, got = (*o)[size_t(r * I + i)];
          // a few ulp, and float's rounding of a times the slope 2 |a| of log sigmoid(2a)
          const double tol = (4e-7 + 2.4e-7 * 2 * std::fabs(a)) * std::fabs(want) + 1e-30;
          if (!(std::fabs(got - want) <= tol)) ++bad;
          if (std::fabs(want) > 1e-25) worst = std::max(worst, std::fabs(got - want) / std::fabs(want));
        }
      CHECK_MESSAGE(bad == 0, "I " << I << std::string(o == &out ? "" : " (portable)") << ": worst relative error " << worst);
    }
    kernels::gelu_tanh_mul_rows(gu.data(), I, 1, 2, one.data());  // row 1 alone: the same bytes
    CHECK(std::memcmp(one.data() + I, out.data() + I, size_t(I) * sizeof(float)) == 0);
    CHECK(columns_split_alike(I, R, out, [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* o) {
      kernels::gelu_tanh_mul_cols(gu.data(), I, r0, r1, c0, c1, o);
    }));
    CHECK(columns_split_alike(I, R, portable, [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* o) {
      kernels::detail::gelu_tanh_mul_cols_portable(gu.data(), I, r0, r1, c0, c1, o);
    }));
  }
}

TEST_CASE("paged attention equals contiguous softmax attention over scattered blocks") {
  const int64_t B = 16, Hkv = 2, D = 64, NB = 12;
  for (int32_t ctx : {1, 16, 17, 100, 150}) {
    auto k = randn(NB * B * Hkv * D, 41 + ctx), v = randn(NB * B * Hkv * D, 42 + ctx), q = randn(D, 43 + ctx);
    std::vector<int32_t> table = {7, 2, 11, 0, 5, 9, 3, 1, 4, 10};  // scattered physical blocks
    kernels::PagedKvView view{k.data(), v.data(), B, Hkv, D};
    std::vector<float> scratch(size_t(kernels::paged_attention_scratch(ctx - 1))), out(D, NAN);
    const float scale = 0.125f;
    const int64_t kvh = 1;
    kernels::paged_attention_head(q.data(), view, table.data(), ctx - 1, kvh, scale, scratch.data(), out.data());
    std::vector<double> s(ctx);
    double m = -1e300, den = 0;
    auto row = [&](const std::vector<float>& c, int j) { return &c[((table[j / B] * B + j % B) * Hkv + kvh) * D]; };
    for (int j = 0; j < ctx; ++j) {
      double dot = 0;
      for (int d = 0; d < D; ++d) dot += double(q[d]) * row(k, j)[d];
      s[j] = dot * scale;
      m = std::max(m, s[j]);
    }
    for (int j = 0; j < ctx; ++j) den += s[j] = std::exp(s[j] - m);
    for (int d = 0; d < D; ++d) {
      double ref = 0;
      for (int j = 0; j < ctx; ++j) ref += s[j] / den * row(v, j)[d];
      CHECK(out[d] == doctest::Approx(ref).epsilon(1e-4).scale(1));
    }
  }
}

TEST_CASE("paged attention: the SIMD variants equal the portable kernel bit for bit (head_dim 16..128, 256)") {
  using Variant = bool (*)(const float*, const kernels::PagedKvView&, const int32_t*, int32_t, int64_t, float, float*,
                           float*, float, int32_t);
  std::vector<std::pair<const char*, Variant>> variants;
  if (kernels::cpu_has_avx2()) variants.push_back({"avx2", kernels::detail::paged_attention_head_avx2});
  if (kernels::detail::cpu_has_avx512_vnni())
    variants.push_back({"avx512", kernels::detail::paged_attention_head_avx512});
  if (variants.empty()) LLMCTL_SKIP("this CPU has neither AVX2/FMA nor AVX-512 (the portable kernel runs everywhere)");
  const int64_t B = 16, Hkv = 3, NB = 12;
  int checked = 0;
  for (auto [name, variant] : variants)
    for (int64_t D : {16, 32, 48, 64, 80, 96, 112, 128, 256})
      for (int32_t ctx : {1, 2, 3, 15, 16, 17, 31, 33, 100, 161}) {
        if (std::string(name) == "avx2" && D % 32) continue;  // AVX2: multiples of 32
        auto k = randn(NB * B * Hkv * D, 51 + ctx), v = randn(NB * B * Hkv * D, 52 + ctx), q = randn(D, 53 + ctx, 3.0f);
        if (ctx == 100)  // scores far below the maximum: exp underflows to 0 for some keys
          for (int64_t d = 0; d < D; ++d) q[d] *= 40.0f;
        const std::vector<int32_t> table = {7, 2, 11, 0, 5, 9, 3, 1, 4, 10, 6};
        const kernels::PagedKvView view{k.data(), v.data(), B, Hkv, D};
        for (int64_t kvh = 0; kvh < Hkv; ++kvh) {
          const size_t ns = size_t(kernels::paged_attention_scratch(ctx - 1));
          std::vector<float> s1(ns, NAN), s2(ns, NAN), a(D, NAN), b(D, NAN);  // NaN scratch: never read
          REQUIRE(variant(q.data(), view, table.data(), ctx - 1, kvh, 0.125f, s1.data(), a.data(), 0.0f, 0));
          kernels::detail::paged_attention_head_portable(q.data(), view, table.data(), ctx - 1, kvh, 0.125f, s2.data(),
                                                         b.data());
          INFO(name << " D " << D << " ctx " << ctx << " kvh " << kvh);
          CHECK(std::memcmp(a.data(), b.data(), size_t(D) * 4) == 0);
          CHECK(std::memcmp(s1.data(), s2.data(), size_t(ctx) * 4) == 0);  // the probabilities too
          ++checked;
        }
      }
  int want = 0;
  for (const auto& v : variants) want += (std::string(v.first) == "avx2" ? 5 : 9) * 10 * 3;
  CHECK(checked == want);
  const std::vector<float> z(192 * 16);
  std::vector<float> s(16), o(192);
  const int32_t t0[1] = {0};
  for (const auto& v : variants)  // other head sizes: left to the portable kernel (AVX2: 48 too)
    for (int64_t D : {8, 48, 72, 144, 192})
      if (D != 48 || std::string(v.first) == "avx2")
        CHECK_FALSE(v.second(z.data(), {z.data(), z.data(), 16, 1, D}, t0, 0, 0, 1.f, s.data(), o.data(), 0.0f, 0));
}

TEST_CASE("soft-capped paged attention: the SIMD variants' scores, capped by the portable kernel's tanh, same bits") {
  using kernels::detail::paged_attention_head_avx2, kernels::detail::paged_attention_head_avx512;
  const bool avx512 = kernels::detail::cpu_has_avx512_vnni();
  if (!kernels::cpu_has_avx2()) LLMCTL_SKIP("this CPU has no AVX2 (the portable kernel soft-caps)");
  const int64_t B = 16, Hkv = 2, NB = 12;
  const std::vector<int32_t> table = {7, 2, 11, 0, 5, 9, 3, 1, 4, 10, 6};
  int checked = 0;
  for (int variant = 0; variant < (avx512 ? 2 : 1); ++variant)
    for (int64_t D : {64, 128, 256})
      for (int32_t ctx : {1, 17, 100, 161})
        for (float softcap : {50.0f, 3.0f}) {  // Gemma 2's, and one that caps nearly every score
          const auto k = randn(NB * B * Hkv * D, 71 + ctx), v = randn(NB * B * Hkv * D, 72 + ctx);
          const auto q = randn(D, 73 + ctx, 30.0f);  // scores of tens: the cap matters
          const kernels::PagedKvView view{k.data(), v.data(), B, Hkv, D};
          for (int64_t kvh = 0; kvh < Hkv; ++kvh) {
            const size_t ns = size_t(kernels::paged_attention_scratch(ctx - 1));
            std::vector<float> s1(ns, NAN), s2(ns, NAN), s3(ns, NAN), a(D, NAN), b(D, NAN), c(D, NAN);
            REQUIRE((variant == 0 ? paged_attention_head_avx2 : paged_attention_head_avx512)(
                q.data(), view, table.data(), ctx - 1, kvh, 0.125f, s1.data(), a.data(), softcap, 0));
            kernels::detail::paged_attention_head_portable(q.data(), view, table.data(), ctx - 1, kvh, 0.125f,
                                                           s2.data(), b.data(), softcap);
            INFO("variant " << variant << " D " << D << " ctx " << ctx << " softcap " << softcap);
            CHECK(std::memcmp(a.data(), b.data(), size_t(D) * 4) == 0);
            CHECK(std::memcmp(s1.data(), s2.data(), size_t(ctx) * 4) == 0);
            // and the cap changed the result (ctx > 1: the probabilities differ)
            kernels::detail::paged_attention_head_portable(q.data(), view, table.data(), ctx - 1, kvh, 0.125f,
                                                           s3.data(), c.data());
            if (ctx > 1) CHECK(std::memcmp(c.data(), b.data(), size_t(D) * 4) != 0);
            ++checked;
          }
        }
  CHECK(checked == (avx512 ? 2 : 1) * 3 * 4 * 2 * 2);
}

TEST_CASE("paged attention over an int8 / fp8 cache read in place equals dequantizing it first, bit for bit") {
  if (!kernels::cpu_has_avx2()) LLMCTL_SKIP("this CPU has no AVX2 (the caller dequantizes the context first)");
  for (auto kind : {kernels::KvQuant::Int8, kernels::KvQuant::Fp8}) {
    CHECK_FALSE(kernels::paged_attention_quant_in_place(kind, 72));
    CHECK_FALSE(kernels::paged_attention_quant_in_place(kind, 144));
  }
  CHECK(kernels::paged_attention_quant_in_place(kernels::KvQuant::Int8, 64));  // AVX2 and AVX-512 read int8 in place
  const int64_t B = 16, Hkv = 3, NB = 12;
  const std::vector<int32_t> table = {7, 2, 11, 0, 5, 9, 3, 1, 4, 10, 6};
  int checked = 0;
  for (kernels::KvQuant kind : {kernels::KvQuant::Int8, kernels::KvQuant::Fp8})
    for (int64_t D : {32, 64, 128, 256})
      for (int32_t ctx : {1, 17, 100, 161}) {
        const auto k = randn(NB * B * Hkv * D, 61 + ctx, 2.0f), v = randn(NB * B * Hkv * D, 62 + ctx, 2.0f);
        const auto q = randn(D, 63 + ctx);
        std::vector<uint8_t> kc(size_t(NB * B * Hkv * D)), vc(kc.size());
        // int8: (scale, zero) per slot and head; fp8: one scale per head (amax / 448 of a smaller
        // range, so large values saturate and small ones fall to subnormal codes)
        std::vector<float> ks(size_t(kind == kernels::KvQuant::Int8 ? NB * B * Hkv * 2 : Hkv)), vs(ks.size());
        if (kind == kernels::KvQuant::Fp8)
          for (size_t h = 0; h < size_t(Hkv); ++h) ks[h] = 0.004f * float(h + 1), vs[h] = 0.005f * float(h + 2);
        for (int64_t at = 0; at < NB * B * Hkv; ++at) {
          if (kind == kernels::KvQuant::Int8) {
            auto* kq = reinterpret_cast<int8_t*>(&kc[size_t(at * D)]);
            auto* vq = reinterpret_cast<int8_t*>(&vc[size_t(at * D)]);
            kernels::quantize_kv_row_int8(&k[size_t(at * D)], D, kq, &ks[size_t(at * 2)]);
            kernels::quantize_kv_row_int8(&v[size_t(at * D)], D, vq, &vs[size_t(at * 2)]);
          } else {
            kernels::quantize_kv_row_fp8(&k[size_t(at * D)], D, ks[size_t(at % Hkv)], &kc[size_t(at * D)]);
            kernels::quantize_kv_row_fp8(&v[size_t(at * D)], D, vs[size_t(at % Hkv)], &vc[size_t(at * D)]);
          }
        }
        const kernels::PagedKvQuantView view{kind, kc.data(), vc.data(), ks.data(), vs.data(), B, Hkv, D};
        std::vector<float> kf(size_t(ctx * Hkv * D)), vf(kf.size());
        kernels::dequantize_kv_positions(view, table.data(), 0, ctx, kf.data(), vf.data());
        const int32_t first_block[1] = {0};
        const kernels::PagedKvView copy{kf.data(), vf.data(), ctx, Hkv, D};
        for (int64_t kvh = 0; kvh < Hkv; ++kvh) {
          const size_t ns = size_t(kernels::paged_attention_scratch(ctx - 1));
          std::vector<float> s1(ns, NAN), s2(ns, NAN), a(D, NAN), b(D, NAN);
          kernels::detail::paged_attention_head_portable(q.data(), copy, first_block, ctx - 1, kvh, 0.125f, s2.data(),
                                                         b.data());
          INFO((kind == kernels::KvQuant::Int8 ? "int8" : "fp8") << " D " << D << " ctx " << ctx << " kvh " << kvh);
          if (kernels::paged_attention_quant_in_place(kind, D)) {  // what this CPU runs
            kernels::paged_attention_head_quant(q.data(), view, table.data(), ctx - 1, kvh, 0.125f, s1.data(), a.data());
            CHECK(std::memcmp(a.data(), b.data(), size_t(D) * 4) == 0);
            CHECK(std::memcmp(s1.data(), s2.data(), size_t(ctx) * 4) == 0);
          }
          {  // the AVX2 kernel, fp8 included (not picked on AVX2 CPUs, but the same bits)
            std::vector<float> s3(ns, NAN), c3(size_t(D), NAN);
            REQUIRE(kernels::detail::paged_attention_head_quant_avx2(q.data(), view, table.data(), ctx - 1, kvh, 0.125f,
                                                                     s3.data(), c3.data(), nullptr));
            CHECK(std::memcmp(c3.data(), b.data(), size_t(D) * 4) == 0);
            CHECK(std::memcmp(s3.data(), s2.data(), size_t(ctx) * 4) == 0);
          }
          ++checked;
        }
      }
  CHECK(checked == 2 * 4 * 4 * 3);
  // Every e4m3 code decodes as the table does: the values of two keys (equal scores) are codes
  // 0..127 and 128..255 (the NaN codes, which the quantizer never writes, replaced by 0).
  std::vector<uint8_t> kc(2 * 128, 0x38), vc(2 * 128);  // keys: every code 1.0
  for (int c = 0; c < 256; ++c) vc[size_t(c)] = uint8_t(c == 0x7f || c == 0xff ? 0 : c);
  const std::vector<float> ks = {0.5f}, vs = {0.75f};
  const int32_t one_block[1] = {0};
  const kernels::PagedKvQuantView view{kernels::KvQuant::Fp8, kc.data(), vc.data(), ks.data(), vs.data(), 2, 1, 128};
  std::vector<float> kf(256), vf(256), s1(16, NAN), s2(16, NAN), a(128, NAN), b(128, NAN);
  kernels::dequantize_kv_positions(view, one_block, 0, 2, kf.data(), vf.data());
  const auto q = randn(128, 71);
  kernels::detail::paged_attention_head_portable(q.data(), {kf.data(), vf.data(), 2, 1, 128}, one_block, 1, 0, 0.125f,
                                                 s2.data(), b.data());
  if (kernels::paged_attention_quant_in_place(kernels::KvQuant::Fp8, 128)) {
    kernels::paged_attention_head_quant(q.data(), view, one_block, 1, 0, 0.125f, s1.data(), a.data());
    CHECK(std::memcmp(a.data(), b.data(), 128 * 4) == 0);
  }
  {
    std::vector<float> c(128, NAN);
    REQUIRE(kernels::detail::paged_attention_head_quant_avx2(q.data(), view, one_block, 1, 0, 0.125f, s1.data(),
                                                             c.data(), nullptr));
    CHECK(std::memcmp(c.data(), b.data(), 128 * 4) == 0);
  }
}

TEST_CASE("AVX2 paged attention of four query tokens (f32, int8, fp8 caches) equals single calls and the portable kernel") {
  if (!kernels::cpu_has_avx2()) LLMCTL_SKIP("this CPU has no AVX2/FMA/F16C");
  const int64_t B = 16, NB = 12;
  const std::vector<int32_t> table = {7, 2, 11, 0, 5, 9, 3, 1, 4, 10, 6};
  const std::vector<std::vector<int32_t>> position_sets = {{0, 1, 2, 3},     {2, 3, 4, 5},     {16, 17, 18, 19},
                                                           {37, 38, 39, 40}, {5, 9, 40, 41},   {99, 100, 150, 160},
                                                           {3, 4, 5, 6},     {63, 64, 65, 66}};
  int checked = 0;
  // One kv head: an f32 cache's value rows read in place; two: copied a block of keys at a time.
  for (int64_t Hkv : {1, 2})
    for (int kind = 0; kind < 3; ++kind)  // f32, int8, fp8
      for (int64_t D : {32, 64, 96, 128})
        for (const auto& pos : position_sets) {
          const uint32_t seed = uint32_t(7 * D + pos[3] + 1000 * kind);
          const auto k = randn(NB * B * Hkv * D, seed), v = randn(NB * B * Hkv * D, seed + 1);
          const auto qs = randn(4 * D, seed + 2, 2.0f);
          const QuantizedKv qkv(kind, k, v, D);
          const kernels::PagedKvQuantView quant = qkv.view(B, Hkv, D);
          std::vector<float> kf(k.size()), vf(v.size());
          // the reference reads the dequantized cache (slot order kept: an identity block table over it)
          if (kind > 0) {
            std::vector<int32_t> all(static_cast<size_t>(NB));
            for (int32_t b = 0; b < int32_t(NB); ++b) all[size_t(b)] = b;
            kernels::dequantize_kv_positions(quant, all.data(), 0, int32_t(NB * B), kf.data(), vf.data());
          }
          const kernels::PagedKvView f32{kind ? kf.data() : k.data(), kind ? vf.data() : v.data(), B, Hkv, D};
          for (int64_t kvh = 0; kvh < Hkv; ++kvh) {
            std::vector<std::vector<float>> s4(4), s1(4), s0(4);
            std::vector<std::vector<float>> o4(4, std::vector<float>(size_t(D), NAN)), o1 = o4, o0 = o4;
            const float* q[4];
            float *sp[4], *op[4];
            for (int t = 0; t < 4; ++t) {
              s4[size_t(t)].assign(size_t(kernels::paged_attention_scratch(pos[size_t(t)])), NAN);
              s1[size_t(t)] = s0[size_t(t)] = s4[size_t(t)];
              q[t] = qs.data() + t * D, sp[t] = s4[size_t(t)].data(), op[t] = o4[size_t(t)].data();
            }
            using kernels::detail::paged_attention_tiles_avx2, kernels::detail::paged_attention_tiles_quant_avx2;
            const bool ran4 = kind == 0
                                  ? paged_attention_tiles_avx2(1, q, pos.data(), f32, table.data(), kvh, 0.125f, sp, op)
                                  : paged_attention_tiles_quant_avx2(1, q, pos.data(), quant, table.data(), kvh, 0.125f,
                                                                     sp, op, nullptr);
            REQUIRE(ran4);
            for (int t = 0; t < 4; ++t) {
              const size_t u = size_t(t);
              const bool ran1 =
                  kind == 0 ? kernels::detail::paged_attention_head_avx2(q[t], f32, table.data(), pos[u], kvh, 0.125f,
                                                                         s1[u].data(), o1[u].data())
                            : kernels::detail::paged_attention_head_quant_avx2(q[t], quant, table.data(), pos[u], kvh,
                                                                               0.125f, s1[u].data(), o1[u].data(),
                                                                               nullptr);
              REQUIRE(ran1);
              kernels::detail::paged_attention_head_portable(q[t], f32, table.data(), pos[u], kvh, 0.125f, s0[u].data(),
                                                             o0[u].data());
              INFO("kind " << kind << " D " << D << " query " << t << " at " << pos[u] << " kvh " << kvh);
              CHECK(std::memcmp(o4[u].data(), o1[u].data(), size_t(D) * 4) == 0);
              CHECK(std::memcmp(o4[u].data(), o0[u].data(), size_t(D) * 4) == 0);
              CHECK(std::memcmp(s4[u].data(), s1[u].data(), size_t(pos[u] + 1) * 4) == 0);
              ++checked;
            }
          }
        }
  CHECK(checked == 3 * 4 * 8 * (1 + 2) * 4);
  const float* q[4] = {nullptr, nullptr, nullptr, nullptr};
  float *sp[4] = {}, *op[4] = {};
  const int32_t pos[4] = {0, 1, 2, 3}, t0[1] = {0};
  const std::vector<float> z(48);
  CHECK_FALSE(
      kernels::detail::paged_attention_tiles_avx2(1, q, pos, {z.data(), z.data(), 1, 1, 48}, t0, 0, 1.f, sp, op));
}

TEST_CASE("attention_exp: within 2 ulp of e^x over [-87, 0], 0 below, NaN kept") {
  int bad = 0;
  double worst = 0;
  for (int i = 0; i <= 2000000; ++i) {
    const float x = -87.0f * float(i) / 2000000.0f;
    const double want = std::exp(double(x)), got = kernels::detail::attention_exp(x);
    const double ulp = std::ldexp(1.0, std::ilogb(want) - 23);
    worst = std::max(worst, std::fabs(got - want) / ulp);
    if (!(std::fabs(got - want) <= 2 * ulp)) ++bad;
  }
  INFO("worst error " << worst << " ulp");
  CHECK(bad == 0);
  CHECK(kernels::detail::attention_exp(0.0f) == 1.0f);
  CHECK(kernels::detail::attention_exp(-87.5f) == 0.0f);
  CHECK(kernels::detail::attention_exp(-INFINITY) == 0.0f);
  CHECK(std::isnan(kernels::detail::attention_exp(NAN)));
}

TEST_CASE("f16 and bf16 conversions round to nearest even and keep specials") {
  CHECK(f16_to_f32(f32_to_f16(1.0f)) == 1.0f);
  CHECK(f32_to_f16(65504.0f) == 0x7bff);
  CHECK(f32_to_f16(65520.0f) == 0x7c00);            // rounds up to inf
  CHECK(f32_to_f16(5.9604645e-08f) == 0x0001);      // smallest subnormal
  CHECK(f16_to_f32(0x0001) == 5.9604645e-08f);
  CHECK(std::isnan(f16_to_f32(f32_to_f16(NAN))));
  CHECK(f32_to_bf16(1.00390625f) == 0x3f80);        // tie -> even
  CHECK(f32_to_bf16(1.01171875f) == 0x3f82);        // tie -> even (up)
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-70000.0f, 70000.0f);
  for (int i = 0; i < 10000; ++i) {
    float f = d(rng);
    float h = f16_to_f32(f32_to_f16(f));
    if (std::fabs(f) < 65504.0f) CHECK(std::fabs(h - f) <= std::fabs(f) * 4.9e-4f + 6e-8f);
    CHECK(std::fabs(bf16_to_f32(f32_to_bf16(f)) - f) <= std::fabs(f) * 3.91e-3f);
  }
}
