// GPTQ (quant/algo/gptq.h), its Hessian (hessian.h) and factorization (linalg.h) against
// llm-compressor's own quantize_weight / accumulate_hessian run on the same seeded random data
// (tests/golden/quant/make_gptq_fixture.py), plus properties that fail if GPTQ is broken.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "engine/core/error.h"
#include "quant/algo/gptq.h"
#include "quant/algo/hessian.h"
#include "quant/algo/linalg.h"
#include "quant/algo/rtn.h"
#include "skip.h"
#include "quant_fixture.h"

using namespace llmctl;
using quant::QuantScheme;

namespace {

struct GptqCase {
  const char* name;
  QuantScheme s;
  bool act_order;
};

const GptqCase kCases[] = {
    {"int4_g64_sym", {4, 64, true}, false},
    {"int4_g64_asym", {4, 64, false}, false},
    {"int4_g64_sym_actorder", {4, 64, true}, true},
    {"int8_ch_sym", {8, -1, true}, false},
};

std::vector<double> to_double(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

// sum over rows of d H d^T with d = w - deq: ||(W - Q) X||^2 up to H's normalization.
double output_error(const std::vector<float>& w, const std::vector<float>& deq, const std::vector<double>& h,
                    int64_t n, int64_t k) {
  double total = 0;
  std::vector<double> d(static_cast<size_t>(k));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < k; ++c) d[size_t(c)] = double(w[size_t(r * k + c)]) - double(deq[size_t(r * k + c)]);
    for (int64_t i = 0; i < k; ++i) {
      double hi = 0;
      for (int64_t j = 0; j < k; ++j) hi += h[size_t(i * k + j)] * d[size_t(j)];
      total += d[size_t(i)] * hi;
    }
  }
  return total;
}

std::vector<float> random_matrix(int64_t rows, int64_t cols, uint32_t seed, float sd) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sd);
  std::vector<float> m(size_t(rows * cols));
  for (float& v : m) v = normal(rng);
  return m;
}

}  // namespace

TEST_CASE("gptq: Hessian equals llm-compressor's accumulate_hessian") {
  auto fx = test::QuantFixture::open();
  if (!fx) LLMCTL_SKIP("fixture absent: " << test::QuantFixture::path());
  const Tensor& xt = fx->get("x");  // [seqs, rows, K]
  const int64_t seqs = xt.dim(0), rows = xt.dim(1), k = xt.dim(2);
  const std::vector<float> x = fx->f32("x");
  const std::vector<float> ref = fx->f32("h");
  // llm-compressor counts one sample per sequence; added here in two uneven batches.
  quant::HessianAccumulator acc(k, 2);
  acc.add(x.data(), 3 * rows, 3);
  acc.add(x.data() + 3 * rows * k, (seqs - 3) * rows, seqs - 3);
  CHECK(acc.samples() == seqs);
  const std::vector<double>& h = acc.h();
  double max_ref = 0, max_diff = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(double(ref[i])));
    max_diff = std::max(max_diff, std::fabs(h[i] - double(ref[i])));
  }
  MESSAGE("Hessian: max |ours - llm-compressor's| = " << max_diff << " of max " << max_ref);
  CHECK(max_diff <= 1e-5 * max_ref);  // theirs is an fp32 sum
  CHECK(h[size_t(5 * k + 5)] == 0);   // the dead input

  // The row stream alone decides the sum: one row at a time on one thread gives the same bits.
  quant::HessianAccumulator one(k, 1);
  for (int64_t r = 0; r < seqs * rows; ++r) one.add(x.data() + r * k, 1, 0);
  CHECK(one.samples() == 0);
  one.add(nullptr, 0, seqs);
  CHECK(one.h() == h);
}

TEST_CASE("gptq: Hessian against a naive sum") {
  const int64_t k = 37, rows = 150;
  const std::vector<float> x = random_matrix(rows, k, 3, 1.0f);
  quant::HessianAccumulator acc(k, 2);
  acc.add(x.data(), rows);
  CHECK(acc.samples() == rows);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < k; ++j) {
      double s = 0;
      for (int64_t r = 0; r < rows; ++r) s += double(x[size_t(r * k + i)]) * double(x[size_t(r * k + j)]);
      REQUIRE(acc.h()[size_t(i * k + j)] == doctest::Approx(2 * s / rows).epsilon(1e-12));
    }
}

TEST_CASE("gptq: upper Cholesky factor of the inverse") {
  const int64_t k = 150;  // blocks of 64 columns: two full, one partial
  const std::vector<float> a = random_matrix(k, 2 * k, 9, 1.0f);
  std::vector<double> h(size_t(k * k), 0.0);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < k; ++j)
      for (int64_t m = 0; m < 2 * k; ++m) h[size_t(i * k + j)] += double(a[size_t(i * 2 * k + m)]) * a[size_t(j * 2 * k + m)];
  std::vector<double> first;
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    std::vector<double> u;
    REQUIRE(quant::upper_cholesky_of_inverse(h, k, u, pool));
    if (first.empty())
      first = u;
    else
      CHECK(u == first);  // the same bits on any thread count
    // U upper with a positive diagonal, and (U^T U) H = I.
    for (int64_t i = 0; i < k; ++i) {
      CHECK(u[size_t(i * k + i)] > 0);
      for (int64_t j = 0; j < i; ++j) REQUIRE(u[size_t(i * k + j)] == 0);
    }
    std::vector<double> inv(size_t(k * k), 0.0);  // U^T U
    for (int64_t t = 0; t < k; ++t)
      for (int64_t i = t; i < k; ++i)
        for (int64_t m = t; m < k; ++m) inv[size_t(i * k + m)] += u[size_t(t * k + i)] * u[size_t(t * k + m)];
    double worst = 0;
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < k; ++j) {
        double s = 0;
        for (int64_t m = 0; m < k; ++m) s += inv[size_t(i * k + m)] * h[size_t(m * k + j)];
        worst = std::max(worst, std::fabs(s - (i == j ? 1.0 : 0.0)));
      }
    CHECK(worst < 1e-9);
  }
  std::vector<double> not_pd = h, u;
  not_pd[size_t(100 * k + 100)] = -1;  // a bad pivot in the last block
  ThreadPool pool(1);
  CHECK_FALSE(quant::upper_cholesky_of_inverse(not_pd, k, u, pool));
}

TEST_CASE("gptq: equals llm-compressor's quantize_weight") {
  auto fx = test::QuantFixture::open();
  if (!fx) LLMCTL_SKIP("fixture absent: " << test::QuantFixture::path());
  const std::vector<float> w = fx->f32("w");
  const int64_t n = fx->get("w").dim(0), k = fx->get("w").dim(1);
  const std::vector<double> h = to_double(fx->f32("h"));
  for (const GptqCase& tc : kCases) {
    const std::string name = tc.name;
    CAPTURE(name);
    const std::string pre = std::string("gptq.") + tc.name;
    quant::GptqOptions o;
    o.scheme = tc.s;
    o.act_order = tc.act_order;
    o.block_size = 128;
    o.dampening = 0.01;
    const quant::GptqResult res = quant::gptq_quantize(w.data(), n, k, h, o);
    const quant::QuantizedLinear& q = res.weight;
    q.validate();
    CHECK(q.g_idx.empty());  // static groups: no g_idx even with act-order
    CHECK(res.dead_columns == 1);
    CHECK_FALSE(res.rtn_fallback);
    CHECK(res.dampening_used == 0.01);

    const std::vector<float> ref_scale = fx->f32(pre + ".scale");
    const std::vector<int32_t> ref_zero = fx->unsigned_codes(pre + ".zero", tc.s.bits);
    REQUIRE(q.scales.size() == ref_scale.size());
    for (size_t i = 0; i < ref_scale.size(); ++i) {
      CHECK(q.scales[i] == ref_scale[i]);
      CHECK(q.zeros[i] == ref_zero[i]);
    }

    // Codes against llm-compressor's fp32 run: equal except where its accumulated fp32 error (ours is
    // fp64) crosses a rounding boundary; the trajectory then drifts a step or two. Where the codes are
    // equal the dequantized weights are the same numbers.
    const std::vector<int32_t> ref_codes = fx->unsigned_codes(pre + ".codes", tc.s.bits);
    const std::vector<float> ref_deq = fx->f32(pre + ".deq");
    const std::vector<float> deq = quant::dequantize(q);
    int64_t differ = 0;
    for (int64_t i = 0; i < n * k; ++i) {
      const float scale = q.scales[size_t((i / k) * q.groups() + q.group_of(i % k))];
      if (int32_t(q.q[size_t(i)]) == ref_codes[size_t(i)]) {
        REQUIRE(deq[size_t(i)] == doctest::Approx(ref_deq[size_t(i)]).epsilon(1e-6));
      } else {
        ++differ;
        CHECK(std::fabs(deq[size_t(i)] - ref_deq[size_t(i)]) <= 2.001f * scale);
      }
    }
    // The same function run in fp64: the codes are ours.
    const std::vector<int32_t> ref_codes64 = fx->unsigned_codes(pre + ".codes64", tc.s.bits);
    int64_t differ64 = 0;
    for (int64_t i = 0; i < n * k; ++i) differ64 += int32_t(q.q[size_t(i)]) != ref_codes64[size_t(i)];
    MESSAGE(name << ": codes differing from llm-compressor's fp32 run " << differ << ", fp64 run " << differ64
                    << " (of " << n * k << "); loss " << res.loss << " vs " << fx->f32(pre + ".loss")[0]
                    << " (fp64 " << fx->f32(pre + ".loss64")[0] << ")");
    CHECK(1.0 - double(differ) / double(n * k) > 0.995);
    CHECK(1.0 - double(differ64) / double(n * k) > 0.999);
    CHECK(res.loss == doctest::Approx(fx->f32(pre + ".loss64")[0]).epsilon(1e-4));
    for (int64_t r = 0; r < n; ++r) CHECK(deq[size_t(r * k + 5)] == 0);  // the dead input's weights
    CHECK(res.loss == doctest::Approx(fx->f32(pre + ".loss")[0]).epsilon(0.01));
  }
}

TEST_CASE("gptq: smaller output error than RTN; same result on 1 and 2 threads") {
  auto fx = test::QuantFixture::open();
  if (!fx) LLMCTL_SKIP("fixture absent: " << test::QuantFixture::path());
  const std::vector<float> w = fx->f32("w");
  const int64_t n = fx->get("w").dim(0), k = fx->get("w").dim(1);
  const std::vector<double> h = to_double(fx->f32("h"));
  for (const GptqCase& tc : kCases) {
    const std::string name = tc.name;
    CAPTURE(name);
    quant::GptqOptions o;
    o.scheme = tc.s;
    o.act_order = tc.act_order;
    o.block_size = 48;  // blocks that do not divide K nor align with groups
    o.threads = 1;
    const quant::GptqResult one = quant::gptq_quantize(w.data(), n, k, h, o);
    o.threads = 2;
    const quant::GptqResult two = quant::gptq_quantize(w.data(), n, k, h, o);
    CHECK(one.weight.q == two.weight.q);
    CHECK(one.loss == two.loss);

    const double gptq_err = output_error(w, quant::dequantize(two.weight), h, n, k);
    const double rtn_err = output_error(w, quant::dequantize(quant::rtn_quantize(w.data(), n, k, tc.s)), h, n, k);
    MESSAGE(name << ": ||(W - Q) X||^2 GPTQ " << gptq_err << ", RTN " << rtn_err);
    CHECK(gptq_err < 0.8 * rtn_err);
  }
}

TEST_CASE("gptq: dampening raised until H factors; RTN when it never does") {
  const int64_t n = 6, k = 64;
  const std::vector<float> w = random_matrix(n, k, 21, 0.05f);
  const QuantScheme s{4, 32, false};
  // H = A A^T - 0.05 mean(diag) I: indefinite, made positive definite by dampening 0.1 (not 0.01).
  const std::vector<float> a = random_matrix(k, 8, 22, 1.0f);
  std::vector<double> h(size_t(k * k), 0.0);
  double mean = 0;
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < k; ++j)
      for (int64_t m = 0; m < 8; ++m) h[size_t(i * k + j)] += double(a[size_t(i * 8 + m)]) * a[size_t(j * 8 + m)];
  for (int64_t i = 0; i < k; ++i) mean += h[size_t(i * k + i)] / double(k);
  for (int64_t i = 0; i < k; ++i) h[size_t(i * k + i)] -= 0.05 * mean;
  quant::GptqOptions o;
  o.scheme = s;
  o.dampening = 0.01;
  const quant::GptqResult raised = quant::gptq_quantize(w.data(), n, k, h, o);
  CHECK(raised.dampening_used == doctest::Approx(0.1));
  CHECK_FALSE(raised.rtn_fallback);
  CHECK(raised.notes.size() == 1);
  raised.weight.validate();

  // Negative definite: no dampening helps; the identity factor makes it RTN exactly.
  std::vector<double> neg(size_t(k * k), 0.0);
  for (int64_t i = 0; i < k; ++i) neg[size_t(i * k + i)] = -1;
  const quant::GptqResult fallback = quant::gptq_quantize(w.data(), n, k, neg, o);
  CHECK(fallback.rtn_fallback);
  CHECK(fallback.weight.q == quant::rtn_quantize(w.data(), n, k, s).q);

  std::vector<double> nan = neg;
  nan[3] = std::nan("");
  CHECK_THROWS(quant::gptq_quantize(w.data(), n, k, nan, o));
  CHECK_THROWS(quant::gptq_quantize(w.data(), n, k, std::vector<double>(10), o));
}

TEST_CASE("gptq: a diagonal Hessian spreads no error, so GPTQ is RTN") {
  const int64_t n = 10, k = 128;
  const std::vector<float> w = random_matrix(n, k, 31, 0.05f);
  std::vector<double> h(size_t(k * k), 0.0);
  for (int64_t i = 0; i < k; ++i) h[size_t(i * k + i)] = 0.5 + double(i % 7);
  for (const QuantScheme& s : {QuantScheme{4, 32, false}, QuantScheme{4, 64, true}, QuantScheme{8, -1, true}})
    for (bool update : {false, true})
      for (bool act_order : {false, true}) {
        if (update && act_order) continue;
        CAPTURE(s.label());
        CAPTURE(update);
        CAPTURE(act_order);
        quant::GptqOptions o;
        o.scheme = s;
        o.update_group_qparams = update;
        o.act_order = act_order;
        o.block_size = 32;
        const quant::GptqResult res = quant::gptq_quantize(w.data(), n, k, h, o);
        const quant::QuantizedLinear rtn = quant::rtn_quantize(w.data(), n, k, s);
        CHECK(res.weight.q == rtn.q);
        CHECK(res.weight.scales == rtn.scales);
        CHECK(res.weight.zeros == rtn.zeros);
      }
}

TEST_CASE("gptq: group qparams from the updated weights") {
  auto fx = test::QuantFixture::open();
  if (!fx) LLMCTL_SKIP("fixture absent: " << test::QuantFixture::path());
  const std::vector<float> w = fx->f32("w");
  const int64_t n = fx->get("w").dim(0), k = fx->get("w").dim(1);
  const std::vector<double> h = to_double(fx->f32("h"));
  for (const QuantScheme& s : {QuantScheme{4, 64, true}, QuantScheme{4, 32, false}}) {
    CAPTURE(s.label());
    quant::GptqOptions o;
    o.scheme = s;
    o.block_size = 100;  // rounded down to whole groups
    const quant::GptqResult fixed = quant::gptq_quantize(w.data(), n, k, h, o);
    o.update_group_qparams = true;
    o.threads = 1;
    const quant::GptqResult one = quant::gptq_quantize(w.data(), n, k, h, o);
    o.threads = 2;
    const quant::GptqResult two = quant::gptq_quantize(w.data(), n, k, h, o);
    two.weight.validate();
    CHECK(one.weight.q == two.weight.q);
    CHECK(one.weight.scales == two.weight.scales);
    // The first group starts before any update: the weight as given (the dead column is in it, zeroed
    // first, so compare where that does not matter: rows whose group 0 extremes are elsewhere).
    const int64_t g = two.weight.groups();
    int64_t first_same = 0, later_differ = 0;
    for (int64_t r = 0; r < n; ++r) {
      first_same += two.weight.scales[size_t(r * g)] == fixed.weight.scales[size_t(r * g)];
      for (int64_t gi = 1; gi < g; ++gi)
        later_differ += two.weight.scales[size_t(r * g + gi)] != fixed.weight.scales[size_t(r * g + gi)];
    }
    CHECK(first_same >= n - 2);
    CHECK(later_differ > n);  // later groups see the spread error
    const double err_update = output_error(w, quant::dequantize(two.weight), h, n, k);
    const double err_fixed = output_error(w, quant::dequantize(fixed.weight), h, n, k);
    const double err_rtn = output_error(w, quant::dequantize(quant::rtn_quantize(w.data(), n, k, s)), h, n, k);
    MESSAGE(s.label() << ": ||(W - Q) X||^2 updated qparams " << err_update << ", fixed " << err_fixed << ", RTN "
                      << err_rtn);
    CHECK(err_update < 0.8 * err_rtn);
  }
  quant::GptqOptions o;
  o.update_group_qparams = true;
  o.act_order = true;
  o.scheme = {4, 64, true};
  CHECK_THROWS_AS(quant::gptq_quantize(w.data(), n, k, h, o), InputError);
}
