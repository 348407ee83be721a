// Codebooks (kernels/cpu/qlinear.h): 8-bit codes that take at most 16 values (GGUF IQ4_NL / IQ4_XS
// levels, Q3_K's -4..3) packed as 4-bit positions in a table. The int8 mode gives the 8-bit weight's
// bits (the same integer dot products in the same order); the f32 mode reads the inputs in the 4-bit
// order, so it is checked against a double reference, and SIMD against the scalar reference bit for bit.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/backend/cpu/cpu_quantized_weight.h"
#include "kernels/cpu/qlinear.h"
#include "kernels/cpu/qlinear_impl.h"
#include "kernels/kernel_check.h"
#include "tests/unit/qlinear_test_util.h"
#include "tests/unit/skip.h"

using namespace llmctl;
using namespace llmctl::qtest;
using kernels::QLayout;
using kernels::ScaleType;

namespace {

// GGUF IQ4_NL's levels, Q3_K's codes, and 16 values with both int8 extremes.
const std::vector<std::vector<int>> kBooks = {
    {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113},
    {-4, -3, -2, -1, 0, 1, 2, 3},
    {-128, -100, -77, -50, -9, -3, -1, 0, 2, 5, 31, 64, 90, 101, 126, 127},
};

// q's 8-bit codes redrawn from book.
void draw_codes(QW& q, const std::vector<int>& book, uint32_t seed) {
  std::mt19937 rng(seed);
  for (auto& c : q.codes) c = uint8_t(int8_t(book[rng() % book.size()]));
}

// The weight packed row-lane twice: as its 8-bit codes, and as positions in its codebook.
struct Pair {
  QW eight, four;
  int8_t table[16];
  kernels::FactoredParams fs, fo;
  kernels::QWeightView v8() const { return eight.view(); }
  kernels::QWeightView v4() const {
    kernels::QWeightView v = four.view();
    v.codebook = table;
    return v;
  }
};

Pair make_pair(const QW& q, int zero, bool factored) {
  Pair p{q, q, {}, {}, {}};
  std::vector<uint8_t> index(q.codes.size());
  REQUIRE(kernels::qweight_codebook(int64_t(q.codes.size()), q.codes.data(), p.table, index.data()));
  p.four.bits = 4, p.four.codes = index;
  if (!factored) {
    p.eight = q.as(QLayout::RowLane16, zero), p.four = p.four.as(QLayout::RowLane16, zero);
    return p;
  }
  REQUIRE(kernels::qweight_factor(q.n, q.k, q.group, q.scale_f32.data(), &p.fs));
  REQUIRE(kernels::qweight_factor(q.n, q.k, q.group, q.offset_f32.data(), &p.fo));
  for (QW* w : {&p.eight, &p.four}) {
    w->st = ScaleType::Factored, w->layout = QLayout::RowLane16, w->implied_zero = zero;
    w->packed.assign(size_t((q.n + 15) / 16 * kernels::qweight_rowlane_block_bytes(w->bits, q.k, q.group, w->st, zero)), 0xEE);
    kernels::qweight_pack_rowlane(w->bits, q.n, q.k, q.group, w->st, w->codes.data(), &p.fs, &p.fo, w->packed.data(), zero);
  }
  return p;
}

struct RowLaneKernels {
  const char* name;
  decltype(&kernels::detail::qlinear_rows_q8_rowlane_scalar) q8;
  decltype(&kernels::detail::qlinear_rows_f32_rowlane_scalar) f32;
};
std::vector<RowLaneKernels> codebook_kernels() {
  std::vector<RowLaneKernels> k = {
      {"scalar", kernels::detail::qlinear_rows_q8_rowlane_scalar, kernels::detail::qlinear_rows_f32_rowlane_scalar}};
  if (kernels::cpu_has_avx2())
    k.push_back({"avx2", kernels::detail::qlinear_rows_q8_rowlane_avx2, kernels::detail::qlinear_rows_f32_rowlane_avx2});
  else
    MESSAGE("this CPU has no AVX2/FMA/F16C: the AVX2 codebook kernels are not tested here");
  return k;
}

}  // namespace

TEST_CASE("qweight_codebook: the distinct values ascending, each code's position; none past 16 values") {
  std::mt19937 rng(3);
  for (const auto& book : kBooks) {
    std::vector<uint8_t> codes(999), index(codes.size());
    for (auto& c : codes) c = uint8_t(int8_t(book[rng() % book.size()]));
    int8_t table[16];
    REQUIRE(kernels::qweight_codebook(int64_t(codes.size()), codes.data(), table, index.data()));
    std::vector<int> sorted = book;
    std::sort(sorted.begin(), sorted.end());
    for (size_t j = 0; j < 16; ++j) CHECK(int(table[j]) == sorted[std::min(j, sorted.size() - 1)]);
    for (size_t i = 0; i < codes.size(); ++i) {
      REQUIRE(index[i] < 16);
      CHECK(table[index[i]] == int8_t(codes[i]));
    }
  }
  std::vector<uint8_t> codes(17), index(17);
  for (int i = 0; i < 17; ++i) codes[size_t(i)] = uint8_t(i * 7);
  int8_t table[16];
  CHECK_FALSE(kernels::qweight_codebook(17, codes.data(), table, index.data()));
  CHECK(kernels::qweight_codebook(16, codes.data(), table, index.data()));
  CHECK_FALSE(kernels::qweight_codebook(0, codes.data(), table, index.data()));
}

TEST_CASE("codebook kernels: the int8 mode gives the 8-bit weight's bits; f32 near a double reference; SIMD = scalar") {
  int cases = 0;
  for (size_t bi = 0; bi < kBooks.size(); ++bi)
    for (int group : {16, 32, 64})
      for (ScaleType st : {ScaleType::F16, ScaleType::F32, ScaleType::Factored})
        for (int zero : {-1, 0}) {
          const int64_t N = 16 * 3 + 5 + 2 * int64_t(bi), K = 512;
          QW q = make_qw(8, group, N, K, st == ScaleType::Factored ? ScaleType::F32 : st, uint32_t(40 + cases));
          draw_codes(q, kBooks[bi], uint32_t(90 + cases));
          if (st == ScaleType::Factored) kquant_params(q, zero, uint32_t(7 + cases));
          if (zero == 0)  // no offsets: every one -0
            for (size_t i = 0; i < q.offset_f32.size(); ++i) {
              q.offset_f32[i] = -0.0f;
              if (st == ScaleType::F16) q.offset_f16[i] = 0x8000;
            }
          const Pair p = make_pair(q, zero, st == ScaleType::Factored);
          INFO("book " << bi << " group " << group << " scale type " << int(st) << " zero " << zero);
          CHECK(p.four.packed.size() < p.eight.packed.size());
          std::vector<uint8_t> back(q.codes.size());
          kernels::qweight_unpack_rowlane(4, N, K, group, p.four.st, p.four.packed.data(), back.data(), zero);
          CHECK(back == p.four.codes);
          std::vector<float> r8(static_cast<size_t>(K)), r4(static_cast<size_t>(K));
          for (int64_t r : {int64_t(0), int64_t(21), N - 1}) {
            kernels::detail::dequantize_row_rowlane(p.v8(), r, r8.data());
            kernels::detail::dequantize_row_rowlane(p.v4(), r, r4.data());
            CHECK(same_bits(r8, r4));
          }
          for (int64_t T : {1, 2, 3, 5}) {
            const auto x = randn(size_t(T * K), uint32_t(200 + T)), bias = randn(size_t(N), 201);
            const ActBuf a(x.data(), T, K);
            std::vector<float> want(size_t(T * N)), ref4(size_t(T * N));
            kernels::detail::qlinear_rows_q8_rowlane_scalar(a.q, p.v8(), bias.data(), 0, N, want.data(), N);
            kernels::detail::qlinear_rows_f32_rowlane_scalar(x.data(), T, p.v4(), bias.data(), 0, N, ref4.data(), N);
            double worst = 0;
            for (int64_t t = 0; t < T; ++t)
              for (int64_t n = 0; n < N; ++n) {
                double d = bias[size_t(n)], mag = std::fabs(bias[size_t(n)]);
                for (int64_t k = 0; k < K; ++k) {
                  const double wx = q.w(n, k) * x[size_t(t * K + k)];
                  d += wx, mag += std::fabs(wx);
                }
                worst = std::max(worst, std::fabs(ref4[size_t(t * N + n)] - d) / (mag + 1e-30));
              }
            CHECK(worst < 1e-5);
            for (const RowLaneKernels& kv : codebook_kernels()) {
              for (auto [n0, n1] : {std::pair<int64_t, int64_t>{0, N}, {3, 37}}) {
                INFO(kv.name << " T " << T << " rows " << n0 << ".." << n1);
                std::vector<float> o(size_t(T * N), NAN), f(size_t(T * N), NAN), w2(size_t(T * N), NAN),
                    r2(size_t(T * N), NAN);
                kv.q8(a.q, p.v4(), bias.data(), n0, n1, o.data(), N);
                kv.f32(x.data(), T, p.v4(), bias.data(), n0, n1, f.data(), N);
                for (int64_t t = 0; t < T; ++t)
                  for (int64_t n = n0; n < n1; ++n) {
                    w2[size_t(t * N + n)] = want[size_t(t * N + n)];
                    r2[size_t(t * N + n)] = ref4[size_t(t * N + n)];
                  }
                CHECK(same_bits(o, w2));
                CHECK(same_bits(f, r2));
              }
            }
          }
          ++cases;
        }
  CHECK(cases == 54);
}

TEST_CASE("codebook: refused by the kernels that do not take one, and for 8-bit codes") {
  QW q = make_qw(8, 32, 16, 64, ScaleType::F32, 5);
  draw_codes(q, kBooks[1], 6);
  const Pair p = make_pair(q, -1, false);
  const auto x = randn(64, 10);
  std::vector<float> o(16);
  kernels::QWeightView eight = p.v8();
  eight.codebook = p.table;
  CHECK_THROWS_AS(kernels::detail::qlinear_rows_f32_rowlane_scalar(x.data(), 1, eight, nullptr, 0, 16, o.data(), 16),
                  KernelError);
  QW rows = p.four;
  rows = rows.as(QLayout::Rows);
  kernels::QWeightView rv = rows.view();
  rv.codebook = p.table;
  CHECK_THROWS_AS(kernels::qlinear_rows_f32(x.data(), 1, rv, nullptr, 0, 16, o.data(), 16), KernelError);
  CHECK_THROWS_AS(kernels::detail::qlinear_rows_f32_scalar(x.data(), 1, rv, nullptr, 0, 16, o.data(), 16), KernelError);
  if (kernels::detail::cpu_has_avx512_vnni())
    CHECK_THROWS_AS(kernels::detail::qlinear_rows_f32_rowlane_avx512(x.data(), 1, p.v4(), nullptr, 0, 16, o.data(), 16),
                    KernelError);
  CHECK(kernels::qweight_codebook_ok(QLayout::RowLane16) == (std::string(kernels::qlinear_isa()) != "avx512-vnni"));
  CHECK_FALSE(kernels::qweight_codebook_ok(QLayout::Rows));
}

TEST_CASE("CpuBackend packing: 8-bit codes of at most 16 values are kept as 4-bit positions where the kernels take them") {
  for (int group : {16, 32})
    for (int z : {-1, 0}) {
      const int64_t N = 40, K = 256, G = K / group;
      QW q = make_qw(8, group, N, K, ScaleType::F32, uint32_t(60 + group + z));
      draw_codes(q, kBooks[0], uint32_t(61 + group));
      kquant_params(q, z, uint32_t(62 + group));  // IQ4_XS-like: d x (ls - 32), offsets -0
      LinearWeight c;
      c.format = WeightFormat::Int8Group, c.n = N, c.k = K, c.group_size = group;
      c.data = Tensor::empty_host(DType::I8, {N, K});
      std::memcpy(c.data.data, q.codes.data(), q.codes.size());
      c.scales = Tensor::empty_host(DType::F32, {N, G});
      c.zeros = Tensor::empty_host(DType::F32, {N, G});
      std::memcpy(c.scales.data, q.scale_f32.data(), c.scales.nbytes());
      std::memcpy(c.zeros.data, q.offset_f32.data(), c.zeros.nbytes());
      LinearWeight odd = c;  // a 17th value in the last row: no codebook
      odd.data = Tensor::empty_host(DType::I8, {N, K});
      std::memcpy(odd.data.data, q.codes.data(), q.codes.size());
      odd.data.ptr<int8_t>()[(N - 1) * K + 3] = 7;
      const LinearWeight pc = pack_cpu_quantized(c), po = pack_cpu_quantized(odd);
      const kernels::QWeightView vc = cpu_qweight_view(pc), vo = cpu_qweight_view(po);
      INFO("group " << group << " z " << z << " layout " << int(vc.layout));
      CHECK(vo.codebook == nullptr);
      CHECK(vo.bits == 8);
      if (!kernels::qweight_codebook_ok(vc.layout)) {
        CHECK(vc.codebook == nullptr);
        continue;
      }
      REQUIRE(vc.codebook != nullptr);
      CHECK(vc.bits == 4);
      CHECK(pc.data.nbytes() < po.data.nbytes() * 6 / 10);
      for (int j = 0; j < 16; ++j) CHECK(int(vc.codebook[j]) == kBooks[0][size_t(j)]);
      const int64_t T = 3;
      const auto x = randn(size_t(T * K), 17);
      const ActBuf a(x.data(), T, K);
      std::vector<float> o1(size_t(T * N)), o2(size_t(T * N)), f1(size_t(T * N)), f2(size_t(T * N));
      kernels::qlinear_rows_q8(a.q, vc, nullptr, 0, N - 1, o1.data(), N);  // all rows but the odd one
      kernels::qlinear_rows_q8(a.q, vo, nullptr, 0, N - 1, o2.data(), N);
      kernels::qlinear_rows_f32(x.data(), T, vc, nullptr, 0, N - 1, f1.data(), N);
      kernels::qlinear_rows_f32(x.data(), T, vo, nullptr, 0, N - 1, f2.data(), N);
      CHECK(same_bits(o1, o2));
      for (size_t i = 0; i < f1.size(); ++i) CHECK(f1[i] == doctest::Approx(f2[i]).epsilon(1e-5));
      std::vector<float> r1(static_cast<size_t>(K)), r2(static_cast<size_t>(K));
      kernels::qweight_dequantize_row(vc, 5, r1.data());
      kernels::qweight_dequantize_row(vo, 5, r2.data());
      CHECK(same_bits(r1, r2));
    }
}
