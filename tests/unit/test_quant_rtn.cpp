// RTN (quant/algo/rtn.h): bit-exact with compressed-tensors' weight observer + quantize on the
// fixture's random weight (tests/golden/quant/make_gptq_fixture.py), and its properties on other
// random weights.
#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <random>

#include "quant/algo/rtn.h"
#include "skip.h"
#include "quant_fixture.h"

using namespace llmctl;
using quant::QuantScheme;

namespace {

struct NamedScheme {
  const char* name;
  QuantScheme s;
};

const NamedScheme kRtnSchemes[] = {
    {"int4_g32_sym", {4, 32, true}},  {"int4_g32_asym", {4, 32, false}}, {"int4_g64_sym", {4, 64, true}},
    {"int4_g64_asym", {4, 64, false}}, {"int8_ch_sym", {8, -1, true}},
};

std::vector<float> random_weight(int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.03f);
  std::vector<float> w(size_t(n * k));
  for (float& v : w) v = normal(rng);
  for (int i = 0; i < 16; ++i) w[rng() % w.size()] *= 10;  // outliers
  for (int64_t c = 0; c < 16 && c < k; ++c) w[size_t(c)] = std::fabs(w[size_t(c)]);  // an all-positive stretch
  return w;
}

}  // namespace

TEST_CASE("rtn: codes, scales and zeros equal compressed-tensors'") {
  auto fx = test::QuantFixture::open();
  if (!fx) LLMCTL_SKIP("fixture absent: " << test::QuantFixture::path());
  const std::vector<float> w = fx->f32("w");
  const int64_t n = fx->get("w").dim(0), k = fx->get("w").dim(1);
  for (const auto& [cname, s] : kRtnSchemes) {
    const std::string name = cname;
    CAPTURE(name);
    const std::string pre = std::string("rtn.") + name;
    quant::QuantizedLinear q = quant::rtn_quantize(w.data(), n, k, s);
    q.validate();
    const std::vector<float> ref_scale = fx->f32(pre + ".scale");
    const std::vector<int32_t> ref_zero = fx->unsigned_codes(pre + ".zero", s.bits);
    const std::vector<int32_t> ref_codes = fx->unsigned_codes(pre + ".codes", s.bits);
    REQUIRE(q.scales.size() == ref_scale.size());
    int64_t scale_diff = 0, zero_diff = 0, code_diff = 0;
    for (size_t i = 0; i < ref_scale.size(); ++i) {
      scale_diff += q.scales[i] != ref_scale[i];  // bit-exact: the same fp32 operations
      zero_diff += q.zeros[i] != ref_zero[i];
    }
    for (size_t i = 0; i < ref_codes.size(); ++i) code_diff += int32_t(q.q[i]) != ref_codes[i];
    CHECK(scale_diff == 0);
    CHECK(zero_diff == 0);
    CHECK(code_diff == 0);
  }
}

TEST_CASE("rtn: error at most half a step, zero points in range") {
  const int64_t n = 24, k = 256;
  const std::vector<float> w = random_weight(n, k, 14);
  const QuantScheme schemes[] = {{4, 32, true}, {4, 32, false}, {4, 128, true}, {4, 128, false},
                                 {8, 64, false}, {8, -1, true},  {4, -1, false}};
  for (const QuantScheme& s : schemes) {
    CAPTURE(s.label());
    quant::QuantizedLinear q = quant::rtn_quantize(w.data(), n, k, s);
    q.validate();
    const std::vector<float> d = quant::dequantize(q);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c) {
        const int64_t gi = r * q.groups() + q.group_of(c);
        const float scale = q.scales[size_t(gi)];
        const float err = std::fabs(d[size_t(r * k + c)] - w[size_t(r * k + c)]);
        REQUIRE(err <= scale * 0.5f * (1 + 1e-5f) + 1e-7f);
      }
    for (int32_t z : q.zeros) {
      CHECK(z >= 0);
      CHECK(z <= s.max_code());
      if (s.symmetric) CHECK(z == s.sym_zero());
    }
  }
}

TEST_CASE("rtn: group_qparams conventions") {
  float scale;
  int32_t zero;
  const QuantScheme sym{4, 32, true}, asym{4, 32, false};
  quant::group_qparams(-0.3f, 0.75f, sym, &scale, &zero);
  CHECK(scale == 0.75f / 7.5f);  // absmax / ((qmax - qmin) / 2)
  CHECK(zero == 8);
  quant::group_qparams(-0.3f, 1.2f, asym, &scale, &zero);
  CHECK(scale == (1.2f + 0.3f) / 15.0f);
  CHECK(zero == int32_t(std::nearbyint(-8.0f + 0.3f / scale)) + 8);  // 3 + 8
  quant::group_qparams(0.2f, 0.9f, asym, &scale, &zero);  // min above 0: 0 is kept representable
  CHECK(scale == 0.9f / 15.0f);
  CHECK(zero == 0);
  quant::group_qparams(0.0f, 0.0f, asym, &scale, &zero);  // all-zero group
  CHECK(scale == FLT_EPSILON);
  CHECK(quant::quantize_value(0.0f, scale, zero, asym) == zero);
  quant::group_qparams(-1.0f, 0.5f, QuantScheme{8, -1, true}, &scale, &zero);
  CHECK(scale == 1.0f / 127.5f);
  CHECK(zero == 128);
  // Ties round to even, and the range is clamped.
  CHECK(quant::quantize_value(0.5f, 1.0f, 8, sym) == 8);
  CHECK(quant::quantize_value(1.5f, 1.0f, 8, sym) == 10);
  CHECK(quant::quantize_value(-2.5f, 1.0f, 8, sym) == 6);
  CHECK(quant::quantize_value(7.5f, 1.0f, 8, sym) == 15);
  CHECK(quant::quantize_value(-9.0f, 1.0f, 8, sym) == 0);
}
