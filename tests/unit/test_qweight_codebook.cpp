// Compact codes (kernels/cpu/qlinear.h). Codebooks: 8-bit codes that take at most 16 values (GGUF
// IQ4_NL / IQ4_XS levels) packed as 4-bit positions in a table; the int8 mode gives the 8-bit
// weight's bits (the same integer dot products in the same order); the f32 mode reads the inputs in
// the 4-bit order, so it is checked against a double reference, and SIMD against the scalar reference
// bit for bit. Narrow codes: 8-bit codes within 63 of their least (Q6_K, Q5_K) stored from it: the
// wide weight's bits in both modes; within 15 (Q3_K) as 4-bit codes: the int8 mode's bits.
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
#include "kernels/cpu/qlinear_token_tiles.h"
#include "kernels/kernel_check.h"
#include "tests/unit/qlinear_test_util.h"
#include "tests/unit/skip.h"

using namespace llmctl;
using namespace llmctl::qtest;
using kernels::QLayout;
using kernels::ScaleType;

namespace {

// GGUF IQ4_NL's levels, Q3_K's codes, 16 values with both int8 extremes, IQ2's grid values with their
// signs (spanning 86: the AVX2 tiles without VNNI take them as narrow codes, one vpmaddubsw at a time),
// and 6 values spanning 255.
const std::vector<std::vector<int>> kBooks = {
    {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113},
    {-4, -3, -2, -1, 0, 1, 2, 3},
    {-128, -100, -77, -50, -9, -3, -1, 0, 2, 5, 31, 64, 90, 101, 126, 127},
    {-43, -25, -8, 8, 25, 43},
    {-128, -90, -1, 2, 64, 127},  // few values, spanning past 128: widened, in 3-bit positions too
};

// The codebook prefill choice (qlinear.h select_codebook_prefill) for a scope, the run's own restored.
struct CodebookPrefill {
  std::string was = kernels::qlinear_codebook_prefill();
  explicit CodebookPrefill(const char* choice) { kernels::select_codebook_prefill(choice); }
  ~CodebookPrefill() { kernels::select_codebook_prefill(was); }
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

// bits: the positions' (4, or 3 for a codebook of at most 8 values).
Pair make_pair(const QW& q, int zero, bool factored, int bits = 4) {
  Pair p{q, q, {}, {}, {}};
  std::vector<uint8_t> index(q.codes.size());
  REQUIRE(kernels::qweight_codebook(int64_t(q.codes.size()), q.codes.data(), p.table, index.data()));
  p.four.bits = bits, p.four.codes = index;
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
  if (kernels::detail::cpu_has_avx_vnni())  // the int8 mode; its f32 mode is AVX2's
    k.push_back({"avx-vnni", kernels::detail::qlinear_rows_q8_rowlane_avxvnni, kernels::detail::qlinear_rows_f32_rowlane_avx2});
  else
    MESSAGE("this CPU has no AVX-VNNI: the AVX-VNNI row-lane kernel is not tested here");
  if (kernels::detail::cpu_has_avx512_vnni())
    k.push_back({"avx512-vnni", kernels::detail::qlinear_rows_q8_rowlane_avx512,
                 kernels::detail::qlinear_rows_f32_rowlane_avx512});
  else
    MESSAGE("this CPU has no AVX-512 VNNI (or a step-down ISA was chosen): the AVX-512 row-lane kernels are not tested here");
  if (kernels::detail::cpu_has_amx_int8())  // its int8 prompts (its f32 mode is AVX-512's)
    k.push_back(
        {"amx", kernels::detail::qlinear_rows_q8_rowlane_amx, kernels::detail::qlinear_rows_f32_rowlane_avx512});
  else
    MESSAGE("this CPU (or its OS) has no AMX-INT8: the AMX row-lane prefill is not tested here");
  return k;
}
// Whether kv takes 3-bit codes (the AVX2 and AVX-VNNI kernels, and the scalar reference; not AVX-512's
// or AMX's: qweight_three_bit_ok).
bool takes_three_bits(const RowLaneKernels& kv) {
  return kv.q8 != kernels::detail::qlinear_rows_q8_rowlane_avx512 &&
         kv.q8 != kernels::detail::qlinear_rows_q8_rowlane_amx;
}

// The worst |out - reference| / (sum of |terms|) over [T, N] outputs of x [T, K] against q's double
// reference (with bias).
double worst_vs_reference(const QW& q, const std::vector<float>& x, const std::vector<float>& bias,
                          const std::vector<float>& out, int64_t T) {
  double worst = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < q.n; ++n) {
      double d = bias[size_t(n)], mag = std::fabs(bias[size_t(n)]);
      for (int64_t k = 0; k < q.k; ++k) {
        const double wx = q.w(n, k) * x[size_t(t * q.k + k)];
        d += wx, mag += std::fabs(wx);
      }
      worst = std::max(worst, std::fabs(out[size_t(t * q.n + n)] - d) / (mag + 1e-30));
    }
  return worst;
}

// A weight whose 8-bit codes lie in base..base + span (both ends present; scales of st, factored
// ones K-quant-like; offsets stored (zero -1) or none (0)), packed row-lane as wide 8-bit codes and as
// narrow `bits`-bit codes from base, with views of both (filled in place: the views point into it).
struct NarrowPair {
  QW q;
  kernels::FactoredParams fs, fo;
  std::vector<uint8_t> wide, narrow;
  kernels::QWeightView vw, vn;
};
void make_narrow(NarrowPair& p, int bits, int base, int group, ScaleType st, int zero, int64_t N, int64_t K,
                 uint32_t seed, int span = -1) {
  if (span < 0) span = bits == 3 ? 7 : bits == 4 ? 15 : 63;
  p.q = make_qw(8, group, N, K, st == ScaleType::Factored ? ScaleType::F32 : st, seed);
  QW& q = p.q;
  std::mt19937 rng(seed + 1);
  for (auto& c : q.codes) c = uint8_t(int8_t(base + int(rng() % uint32_t(span + 1))));
  q.codes[0] = uint8_t(int8_t(base)), q.codes[1] = uint8_t(int8_t(base + span));
  if (st == ScaleType::Factored) kquant_params(q, zero, seed + 2);
  if (zero == 0)
    for (size_t i = 0; i < q.offset_f32.size(); ++i) {
      q.offset_f32[i] = -0.0f;
      if (st == ScaleType::F16) q.offset_f16[i] = 0x8000;
    }
  REQUIRE(kernels::qweight_narrow_base(int64_t(q.codes.size()), q.codes.data(), span) == base);
  const void* sp = q.scales();
  const void* op = q.offsets();
  if (st == ScaleType::Factored) {
    REQUIRE(kernels::qweight_factor(N, K, group, q.scale_f32.data(), &p.fs));
    REQUIRE(kernels::qweight_factor(N, K, group, q.offset_f32.data(), &p.fo));
    sp = &p.fs, op = &p.fo;
  }
  p.wide.assign(size_t((N + 15) / 16 * kernels::qweight_rowlane_block_bytes(8, K, group, st, zero)), 0xEE);
  p.narrow.assign(size_t((N + 15) / 16 * kernels::qweight_rowlane_block_bytes(bits, K, group, st, zero)), 0xEE);
  kernels::qweight_pack_rowlane(8, N, K, group, st, q.codes.data(), sp, op, p.wide.data(), zero);
  kernels::qweight_pack_rowlane(bits, N, K, group, st, q.codes.data(), sp, op, p.narrow.data(), zero, base);
  std::vector<uint8_t> back(q.codes.size());
  kernels::qweight_unpack_rowlane(bits, N, K, group, st, p.narrow.data(), back.data(), zero, base);
  CHECK(back == q.codes);
  p.vw = kernels::QWeightView{};
  p.vw.bits = 8, p.vw.n = N, p.vw.k = K, p.vw.group = group, p.vw.layout = QLayout::RowLane16, p.vw.scale_type = st;
  p.vw.implied_zero = zero, p.vw.packed = p.wide.data();
  p.vn = p.vw;
  p.vn.bits = bits, p.vn.packed = p.narrow.data(), p.vn.narrow_base = base, p.vn.narrow_five = span <= 31;
  std::vector<float> rw(static_cast<size_t>(K)), rn(static_cast<size_t>(K));
  for (int64_t r : {int64_t(0), N - 1}) {
    kernels::detail::dequantize_row_rowlane(p.vw, r, rw.data());
    kernels::detail::dequantize_row_rowlane(p.vn, r, rn.data());
    CHECK(same_bits(rw, rn));
  }
}

// Every kernel that takes narrow codes against the scalar reference on p, T tokens, rows split at cut:
// the int8 mode gives the wide weight's bits; the f32 mode (unless int8_only: token counts that only
// the int8 mode treats apart, AMX's tiles of 16 and the prefill's token chunks) the wide weight's
// bits for 8 and 6 bits, the scalar reference's on the narrow weight for 4 and 3 bits (another order of
// inputs: that one within 1e-5 of the double reference).
void check_narrow_kernels(const NarrowPair& p, int64_t T, int64_t cut, uint32_t seed, bool int8_only = false) {
  const int64_t N = p.q.n, K = p.q.k;
  const auto x = randn(size_t(T * K), seed), bias = randn(size_t(N), seed + 1);
  const ActBuf a(x.data(), T, K);
  std::vector<float> want8(size_t(T * N), NAN), want32(size_t(T * N), NAN);
  kernels::detail::qlinear_rows_q8_rowlane_scalar(a.q, p.vw, bias.data(), 0, N, want8.data(), N);
  if (!int8_only)
    kernels::detail::qlinear_rows_f32_rowlane_scalar(x.data(), T, p.vn.bits <= 4 ? p.vn : p.vw, bias.data(), 0, N,
                                                     want32.data(), N);
  if (p.vn.bits <= 4 && !int8_only) CHECK(worst_vs_reference(p.q, x, bias, want32, T) < 1e-5);
  for (const RowLaneKernels& kv : codebook_kernels()) {
    if (p.vn.bits == 3 && !takes_three_bits(kv)) continue;
    INFO(kv.name << " T " << T);
    std::vector<float> o(size_t(T * N), NAN), f(size_t(T * N), NAN);
    kv.q8(a.q, p.vn, bias.data(), 0, cut, o.data(), N), kv.q8(a.q, p.vn, bias.data(), cut, N, o.data(), N);
    CHECK(same_bits(o, want8));
    if (!int8_only) {
      kv.f32(x.data(), T, p.vn, bias.data(), 0, cut, f.data(), N);
      kv.f32(x.data(), T, p.vn, bias.data(), cut, N, f.data(), N);
      CHECK(same_bits(f, want32));
    }
    kernels::QActivations bare = a.q;  // without the quantizer's half-block sums: the kernel adds them up
    bare.half_sum = nullptr;
    std::vector<float> b(size_t(T * N), NAN);
    kv.q8(bare, p.vn, bias.data(), 0, N, b.data(), N);
    CHECK(same_bits(b, want8));
  }
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
    int8_t table_only[16];  // no positions asked: the same table
    REQUIRE(kernels::qweight_codebook(int64_t(codes.size()), codes.data(), table_only, nullptr));
    CHECK(std::memcmp(table, table_only, 16) == 0);
  }
  std::vector<uint8_t> codes(17), index(17);
  for (int i = 0; i < 17; ++i) codes[size_t(i)] = uint8_t(i * 7);
  int8_t table[16];
  CHECK_FALSE(kernels::qweight_codebook(17, codes.data(), table, index.data()));
  CHECK(kernels::qweight_codebook(16, codes.data(), table, index.data()));
  CHECK_FALSE(kernels::qweight_codebook(0, codes.data(), table, index.data()));
  // a 17th value far past the first scan chunk (4096 codes) still refuses; positions of a table with
  // fewer than 16 values: the repeated last one's first place; a code the table lacks: false
  std::vector<uint8_t> many(10000, uint8_t(3)), at(many.size());
  for (int v = 0; v < 16; ++v) many[size_t(v)] = uint8_t(int8_t(v - 8));
  many[9000] = uint8_t(int8_t(100));
  CHECK_FALSE(kernels::qweight_codebook(int64_t(many.size()), many.data(), table, at.data()));
  many[9000] = uint8_t(3);
  REQUIRE(kernels::qweight_codebook(int64_t(many.size()), many.data(), table, at.data()));
  CHECK(at[0] == 0);
  CHECK(at[15] == 15);
  const std::vector<uint8_t> few = {uint8_t(int8_t(-5)), 9, 9, uint8_t(int8_t(-5)), 40};
  std::vector<uint8_t> pos(few.size());
  REQUIRE(kernels::qweight_codebook(int64_t(few.size()), few.data(), table, pos.data()));
  CHECK(std::vector<int>(table, table + 4) == std::vector<int>{-5, 9, 40, 40});
  CHECK(pos == std::vector<uint8_t>{0, 1, 1, 0, 2});
  CHECK(kernels::qweight_codebook_positions(int64_t(few.size()), few.data(), table, pos.data()));
  const uint8_t absent = 41;
  CHECK_FALSE(kernels::qweight_codebook_positions(1, &absent, table, pos.data()));
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
          // 4-bit positions, and for a book of at most 8 values 3-bit ones
          for (int pbits : {4, 3}) {
            if (pbits == 3 && kBooks[bi].size() > 8) continue;
            const Pair p = make_pair(q, zero, st == ScaleType::Factored, pbits);
            INFO("book " << bi << " group " << group << " scale type " << int(st) << " zero " << zero << " bits "
                         << pbits);
            CHECK(p.four.packed.size() < p.eight.packed.size());
            std::vector<uint8_t> back(q.codes.size());
            kernels::qweight_unpack_rowlane(pbits, N, K, group, p.four.st, p.four.packed.data(), back.data(), zero);
            CHECK(back == p.four.codes);
            std::vector<float> r8(static_cast<size_t>(K)), r4(static_cast<size_t>(K));
            for (int64_t r : {int64_t(0), int64_t(21), N - 1}) {
              kernels::detail::dequantize_row_rowlane(p.v8(), r, r8.data());
              kernels::detail::dequantize_row_rowlane(p.v4(), r, r4.data());
              CHECK(same_bits(r8, r4));
            }
            // decode (1..3) and every prefill tile of the widened kernel (4..8 tokens, 9 and 13: a tile of 8
            // and a remainder)
            std::vector<int64_t> counts = {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 35};  // 35: AMX's tiles of 16 and a rest
            if (bi == 0 && zero == -1) counts.push_back(kernels::detail::kTokenChunk + 7);  // past one token chunk
            for (int64_t T : counts) {
              // the f32 mode up to 13 tokens: 35 (AMX's tiles of 16 and a rest) and the token chunks are
              // the int8 mode's alone
              const bool f32 = T <= 13;
              const auto x = randn(size_t(T * K), uint32_t(200 + T)), bias = randn(size_t(N), 201);
              const ActBuf a(x.data(), T, K);
              std::vector<float> want(size_t(T * N)), ref4(size_t(T * N));
              kernels::detail::qlinear_rows_q8_rowlane_scalar(a.q, p.v8(), bias.data(), 0, N, want.data(), N);
              if (f32) {
                kernels::detail::qlinear_rows_f32_rowlane_scalar(x.data(), T, p.v4(), bias.data(), 0, N, ref4.data(),
                                                                 N);
                CHECK(worst_vs_reference(q, x, bias, ref4, T) < 1e-5);
              }
              // IQ2's values (book 3) both ways the AVX2 prompt tiles take them
              for (const char* choice : {"magnitude", "narrow"}) {
                if (bi != 3 && choice[0] == 'n') continue;
                const CodebookPrefill chosen(choice);
                for (const RowLaneKernels& kv : codebook_kernels()) {
                  if (pbits == 3 && !takes_three_bits(kv)) continue;
                  for (auto [n0, n1] : {std::pair<int64_t, int64_t>{0, N}, {3, 37}}) {
                    INFO(kv.name << " " << choice << " T " << T << " rows " << n0 << ".." << n1);
                    std::vector<float> o(size_t(T * N), NAN), f(size_t(T * N), NAN), w2(size_t(T * N), NAN),
                        r2(size_t(T * N), NAN);
                    kv.q8(a.q, p.v4(), bias.data(), n0, n1, o.data(), N);
                    if (f32) kv.f32(x.data(), T, p.v4(), bias.data(), n0, n1, f.data(), N);
                    for (int64_t t = 0; t < T; ++t)
                      for (int64_t n = n0; n < n1; ++n) {
                        w2[size_t(t * N + n)] = want[size_t(t * N + n)];
                        r2[size_t(t * N + n)] = f32 ? ref4[size_t(t * N + n)] : NAN;
                      }
                    CHECK(same_bits(o, w2));
                    if (f32) CHECK(same_bits(f, r2));
                  }
                }
              }
            }
          }
          ++cases;
        }
  CHECK(cases == 90);
}

TEST_CASE("codebooks spanning up to 128 (IQ grids): AVX2 tiles' narrow and magnitude sums at their 16-bit bounds, "
          "8-bit bits") {
  // codebook_narrow_step at its boundaries: a table from lo to hi (ascending)
  auto step = [](int lo, int hi) {
    int8_t t[16];
    for (int j = 0; j < 16; ++j) t[j] = int8_t(lo + (hi - lo) * j / 15);
    return kernels::detail::codebook_narrow_step(t);
  };
  CHECK(step(-4, 3) == 4);
  CHECK(step(-16, 15) == 4);
  CHECK(step(-16, 16) == 2);
  CHECK(step(0, 63) == 2);
  CHECK(step(0, 64) == 1);
  CHECK(step(-43, 43) == 1);
  CHECK(step(-64, 64) == 1);
  CHECK(step(-64, 65) == 0);
  CHECK(step(-127, 113) == 0);
  int8_t mixed[16] = {5, 70, -58, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};  // any order: least and greatest inside
  CHECK(kernels::qweight_code_range(16, reinterpret_cast<const uint8_t*>(mixed)).lo == -58);  // the base
  CHECK(kernels::detail::codebook_narrow_step(mixed) == 1);
  mixed[9] = -59;
  CHECK(kernels::detail::codebook_narrow_step(mixed) == 0);
  // codebook_magnitude_step: of step-1 books only, M x 2 x max |value| x 127 within 32767
  auto magnitude = [](std::vector<int> values) {
    int8_t t[16];
    for (int j = 0; j < 16; ++j) t[j] = int8_t(values[size_t(j) % values.size()]);
    return kernels::detail::codebook_magnitude_step(t);
  };
  CHECK(magnitude({-43, -25, -8, 8, 25, 43}) == 3);  // IQ2's grid: 3 x 2 x 43 x 127 = 32766
  CHECK(magnitude({-44, -25, -8, 8, 25, 43}) == 2);
  CHECK(magnitude({-62, -4, 4, 20, 62}) == 2);  // IQ3_XXS's
  CHECK(magnitude({-64, 0, 64}) == 2);
  CHECK(magnitude({-20, 65}) == 0);  // one product pair at most in 16 bits: narrow codes' step 1
  CHECK(magnitude({-31, 32}) == 0);   // span 63: narrow codes sum 2 already
  CHECK(magnitude({-127, 113}) == 0);  // widened
  CHECK_THROWS_AS(kernels::select_codebook_prefill("fastest"), KernelError);
  CHECK((std::string(kernels::qlinear_codebook_prefill()) == "magnitude" ||
         std::string(kernels::qlinear_codebook_prefill()) == "narrow"));
  // each step's widest book, and the magnitudes' widest for M 3 (IQ2's grid) and 2; rows whose codes all
  // take the book's last value against activations all +-127 (every vpmaddubsw pair 2 x span x 127, or 2
  // x |value| x 127, STEP or M of them summed in 16 bits: one too many wraps), the other rows random;
  // group 16 (two groups a block: M 3 as 3 quads and 1) and 32, decode (1-3 tokens: vpmaddubsw pairs within
  // 64 summed two at a time), prefill tiles of 8 and a rest; 13 and
  // 35 tokens the unpacked tiles (magnitudes past 8 tokens)
  struct Bound {
    std::vector<int> book;
    int step, magnitude;
  };
  const std::vector<Bound> bounds = {{{-64, -40, -8, 0, 25, 64}, 1, 2},
                                     {{-8, 43, -25, 25, 8, -43}, 1, 3},
                                     {{-4, -62, 20, 4, 62}, 1, 2},
                                     {{-31, -5, 0, 7, 32}, 2, 0},
                                     {{-16, -1, 0, 3, 15}, 4, 0}};
  int cases = 0;
  for (const Bound& bound : bounds)
    for (int group : {16, 32}) {
      const std::vector<int>& book = bound.book;
      const int64_t N = 16 * 2 + 3, K = 256;
      QW q = make_qw(8, group, N, K, ScaleType::F16, uint32_t(300 + cases));
      draw_codes(q, book, uint32_t(310 + cases));
      for (int64_t n = 0; n < 16; ++n)
        for (int64_t k = 0; k < K; ++k) q.codes[size_t(n * K + k)] = uint8_t(int8_t(book.back()));
      for (int pbits : {4, 3}) {
        const Pair p = make_pair(q, -1, false, pbits);
        REQUIRE(kernels::detail::codebook_narrow_step(p.table) == bound.step);
        REQUIRE(kernels::detail::codebook_magnitude_step(p.table) == bound.magnitude);
        for (float sign : {1.0f, -1.0f})
          for (int64_t T : {1, 2, 3, 8, 13, 35}) {  // decode (q8_tile's pairs within 64) and the prefill tiles
            std::vector<float> x(size_t(T * K), 0.5f * sign);
            for (int64_t t = 1; t < T; t += 2)  // odd tokens random
              for (int64_t k = 0; k < K; ++k) x[size_t(t * K + k)] = randn(1, uint32_t(t * K + k))[0];
            const ActBuf a(x.data(), T, K);
            std::vector<float> want(size_t(T * N)), o(size_t(T * N), NAN);
            kernels::detail::qlinear_rows_q8_rowlane_scalar(a.q, p.v8(), nullptr, 0, N, want.data(), N);
            for (const char* choice : {"magnitude", "narrow"})
              for (const RowLaneKernels& kv : codebook_kernels()) {
                if (pbits == 3 && !takes_three_bits(kv)) continue;
                const CodebookPrefill chosen(choice);
                INFO(kv.name << " " << choice << " book " << cases / 2 << " group " << group << " T " << T
                             << " sign " << sign << " bits " << pbits);
                kv.q8(a.q, p.v4(), nullptr, 0, N, o.data(), N);
                CHECK(same_bits(o, want));
              }
          }
      }
      ++cases;
    }
  CHECK(cases == 10);
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
  if (kernels::detail::cpu_has_avx512_vnni()) {  // a codebook for 8-bit codes
    CHECK_THROWS_AS(kernels::detail::qlinear_rows_f32_rowlane_avx512(x.data(), 1, eight, nullptr, 0, 16, o.data(), 16),
                    KernelError);
    const ActBuf a(x.data(), 1, 64);
    CHECK_THROWS_AS(kernels::detail::qlinear_rows_q8_rowlane_avx512(a.q, eight, nullptr, 0, 16, o.data(), 16),
                    KernelError);
  }
  CHECK(kernels::qweight_compact_codes_ok(QLayout::RowLane16));
  CHECK_FALSE(kernels::qweight_compact_codes_ok(QLayout::Rows));
}

TEST_CASE("CpuBackend packing: 8-bit codes of at most 16 values are kept as 4-bit positions where the kernels take them") {
  for (int group : {16, 32})
    for (int z : {-1, 0}) {
      const int64_t N = 40, K = 256;
      QW q = make_qw(8, group, N, K, ScaleType::F32, uint32_t(60 + group + z));
      draw_codes(q, kBooks[0], uint32_t(61 + group));
      kquant_params(q, z, uint32_t(62 + group));  // IQ4_XS-like: d x (ls - 32), offsets -0
      const LinearWeight c = canonical_weight(q, DType::I8);
      LinearWeight odd = c;  // a 17th value in the last row: no codebook
      odd.data = Tensor::empty_host(DType::I8, {N, K});
      std::memcpy(odd.data.data, q.codes.data(), q.codes.size());
      odd.data.ptr<int8_t>()[(N - 1) * K + 3] = 7;
      const LinearWeight pc = pack_cpu_quantized(c), po = pack_cpu_quantized(odd);
      const kernels::QWeightView vc = cpu_qweight_view(pc), vo = cpu_qweight_view(po);
      INFO("group " << group << " z " << z << " layout " << int(vc.layout));
      CHECK(vo.codebook == nullptr);
      CHECK(vo.bits == 8);
      if (!kernels::qweight_compact_codes_ok(vc.layout)) {
        CHECK(vc.codebook == nullptr);
        continue;
      }
      REQUIRE(vc.codebook != nullptr);
      CHECK(vc.bits == 4);
      CHECK(pc.data.nbytes() < po.data.nbytes() * 6 / 10);
      for (int j = 0; j < 16; ++j) CHECK(int(vc.codebook[j]) == kBooks[0][size_t(j)]);
      const OutputsButLast o = outputs_but_last_row(vc, vo, 3, 17);
      CHECK(same_bits(o.q8_a, o.q8_b));  // f32 mode: the 4-bit layout's order of inputs
      for (size_t i = 0; i < o.f32_a.size(); ++i) CHECK(o.f32_a[i] == doctest::Approx(o.f32_b[i]).epsilon(1e-5));
      std::vector<float> r1(static_cast<size_t>(K)), r2(static_cast<size_t>(K));
      kernels::qweight_dequantize_row(vc, 5, r1.data());
      kernels::qweight_dequantize_row(vo, 5, r2.data());
      CHECK(same_bits(r1, r2));
    }
}

TEST_CASE("CpuBackend packing: a codebook of at most 8 values (IQ2's grid) becomes 3-bit positions where the "
          "kernels take them, the 4-bit positions' bits") {
  for (int group : {16, 32}) {
    const int64_t N = 40, K = 256;
    QW q = make_qw(8, group, N, K, ScaleType::F32, uint32_t(160 + group));
    draw_codes(q, kBooks[3], uint32_t(161 + group));
    kquant_params(q, 0, uint32_t(162 + group));
    const LinearWeight c = canonical_weight(q, DType::I8);
    LinearWeight nine = c;  // 3 more values in the last row, 9: 4-bit positions
    nine.data = Tensor::empty_host(DType::I8, {N, K});
    std::memcpy(nine.data.data, q.codes.data(), q.codes.size());
    for (int i = 1; i <= 3; ++i) nine.data.ptr<int8_t>()[N * K - i] = int8_t(59 + i);
    const LinearWeight p3 = pack_cpu_quantized(c), p4 = pack_cpu_quantized(nine);
    const kernels::QWeightView v3 = cpu_qweight_view(p3), v4 = cpu_qweight_view(p4);
    INFO("group " << group << " layout " << int(v3.layout));
    if (!kernels::qweight_compact_codes_ok(v3.layout)) continue;
    const bool three = kernels::qweight_three_bit_ok();
    REQUIRE(v3.codebook != nullptr);
    REQUIRE(v4.codebook != nullptr);
    CHECK(v3.bits == (three ? 3 : 4));
    CHECK(v4.bits == 4);
    CHECK(v3.narrow_base == kernels::kWideCodes);
    for (int j = 0; j < 16; ++j) CHECK(int(v3.codebook[j]) == kBooks[3][size_t(std::min(j, 5))]);
    CHECK(p4.data.nbytes() - p3.data.nbytes() == (three ? size_t(((N + 15) / 16 + 1) * (K / 32) * 64) : 0));
    for (int64_t T : {1, 3, 6, 11}) {
      const OutputsButLast o = outputs_but_last_row(v3, v4, T, uint32_t(163 + T));
      CHECK(same_bits(o.q8_a, o.q8_b));
      CHECK(same_bits(o.f32_a, o.f32_b));
    }
  }
}

TEST_CASE("narrow 8- and 6-bit codes (Q6_K's -32..31, Q5_K's 0..31): the wide codes' bits, every kernel that takes them") {
  std::vector<uint8_t> probe = {uint8_t(int8_t(-32)), 31, 0};
  CHECK(kernels::qweight_narrow_base(3, probe.data()) == -32);
  probe.push_back(32);  // a range of 64
  CHECK(kernels::qweight_narrow_base(4, probe.data()) == kernels::kWideCodes);
  int cases = 0;
  for (int bits : {8, 6})
    for (int base : {-32, 0, -16, -128, 64})
      for (int group : {16, 32, 64})
        for (ScaleType st : {ScaleType::F16, ScaleType::F32, ScaleType::Factored}) {
          const int zero = cases % 2 ? 0 : -1;
          const int64_t N = 16 * 2 + 3 + cases % 7, K = 512;  // factored: whole runs of 8 groups of 64
          INFO("bits " << bits << " base " << base << " group " << group << " scale type " << int(st) << " zero "
                       << zero);
          NarrowPair p;
          make_narrow(p, bits, base, group, st, zero, N, K, uint32_t(700 + 10 * cases));
          CHECK(p.wide != p.narrow);
          if (bits == 6)  // 384 code bytes a block of 32 inputs x 16 rows against 512
            CHECK(kernels::qweight_rowlane_block_bytes(8, K, group, st, zero) -
                      kernels::qweight_rowlane_block_bytes(6, K, group, st, zero) ==
                  K / 32 * 128);
          for (int64_t T : {1, 2, 3, 4, 6, 9, 13}) check_narrow_kernels(p, T, 5 + T, uint32_t(900 + T));
          check_narrow_kernels(p, 35, 8, 935, true);  // AMX's tiles of 16 and a rest
          if (cases % 10 == 0)  // a prefill longer than one token chunk (6 bits: unpacked per chunk)
            check_narrow_kernels(p, kernels::detail::kTokenChunk + 7, 12, 977, true);
          if (base == 0 || base == -128) {  // codes within 31 (Q5_K's 0..31): the AVX2 tile's sums of four
            NarrowPair p5;
            make_narrow(p5, bits, base, group, st, zero, N, K, uint32_t(800 + 10 * cases), 31);
            REQUIRE(p5.vn.narrow_five);
            for (int64_t T : {1, 4, 6, 9, 13}) check_narrow_kernels(p5, T, 5 + T, uint32_t(950 + T));
            check_narrow_kernels(p5, 35, 8, 985, true);
          }
          ++cases;
        }
  CHECK(cases == 90);
  // a code outside base..base + 63 is refused by the packer; narrow codes with a codebook by the kernels
  std::vector<uint8_t> codes(size_t(16 * 64), 0), out(size_t(1 << 16));
  codes[5] = 64;
  std::vector<float> sc(size_t(16 * 2), 1.0f), of(size_t(16 * 2), 0.0f);
  CHECK_THROWS_AS(kernels::qweight_pack_rowlane(8, 16, 64, 32, ScaleType::F32, codes.data(), sc.data(), of.data(),
                                                out.data(), -1, 0),
                  KernelError);
  CHECK_THROWS_AS(kernels::qweight_pack_rowlane(6, 16, 64, 32, ScaleType::F32, codes.data(), sc.data(), of.data(),
                                                out.data(), -1, 0),
                  KernelError);
  codes[5] = 63;  // in range, but 6-bit codes need a base
  CHECK_THROWS_AS(kernels::qweight_pack_rowlane(6, 16, 64, 32, ScaleType::F32, codes.data(), sc.data(), of.data(),
                                                out.data(), -1),
                  KernelError);
  QW q4 = make_qw(4, 32, 16, 64, ScaleType::F32, 1).as(QLayout::RowLane16);
  kernels::QWeightView v4 = q4.view();
  const int8_t book[16] = {};
  v4.narrow_base = 0, v4.codebook = book;
  const auto x = randn(64, 2);
  std::vector<float> o(16);
  CHECK_THROWS_AS(kernels::detail::qlinear_rows_f32_rowlane_scalar(x.data(), 1, v4, nullptr, 0, 16, o.data(), 16), KernelError);
  CHECK_THROWS_AS(kernels::qlinear_rows_f32(x.data(), 1, v4, nullptr, 0, 16, o.data(), 16), KernelError);
  // 6-bit codes that are not narrow: refused by every row-lane kernel
  kernels::QWeightView v6 = q4.view();
  v6.bits = 6;
  for (const RowLaneKernels& kv : codebook_kernels()) {
    INFO(kv.name);
    CHECK_THROWS_AS(kv.f32(x.data(), 1, v6, nullptr, 0, 16, o.data(), 16), KernelError);
    const ActBuf a(x.data(), 1, 64);
    CHECK_THROWS_AS(kv.q8(a.q, v6, nullptr, 0, 16, o.data(), 16), KernelError);
  }
  CHECK_THROWS_AS(kernels::qlinear_rows_f32(x.data(), 1, v6, nullptr, 0, 16, o.data(), 16), KernelError);
}

TEST_CASE("CpuBackend packing: Q6_K-like codes (-32..31) are kept as 6-bit narrow codes where the kernels take them, same outputs") {
  const int64_t N = 40, K = 256;
  QW q = make_qw(8, 16, N, K, ScaleType::F32, 77);
  std::mt19937 rng(78);
  for (auto& c : q.codes) c = uint8_t(int8_t(int(rng() % 64) - 32));
  kquant_params(q, 0, 79);
  const LinearWeight c = canonical_weight(q, DType::I8);
  LinearWeight wide = c;  // one code of the last row out of range: wide codes
  wide.data = Tensor::empty_host(DType::I8, {N, K});
  std::memcpy(wide.data.data, q.codes.data(), q.codes.size());
  wide.data.ptr<int8_t>()[N * K - 1] = 100;
  const LinearWeight pn = pack_cpu_quantized(c), pw = pack_cpu_quantized(wide);
  const kernels::QWeightView vn = cpu_qweight_view(pn), vw = cpu_qweight_view(pw);
  CHECK(vw.narrow_base == kernels::kWideCodes);
  if (!kernels::qweight_compact_codes_ok(vn.layout)) {
    CHECK(vn.narrow_base == kernels::kWideCodes);
    return;
  }
  CHECK(vn.narrow_base == -32);
  CHECK(vn.bits == 6);
  CHECK(!vn.narrow_five);  // a range of 64
  // Q5_K-like codes (0..31): 6-bit narrow codes within 31 of their base, and the kernels told so
  LinearWeight five = c;
  five.data = Tensor::empty_host(DType::I8, {N, K});
  for (int64_t i = 0; i < N * K; ++i) five.data.ptr<int8_t>()[i] = int8_t(rng() % 32);
  const kernels::QWeightView v5 = cpu_qweight_view(pack_cpu_quantized(five));
  CHECK((v5.bits == 6 && v5.narrow_base == 0 && v5.narrow_five));
  // 384 code bytes a block of 32 inputs, not 512, in each row block and in the descriptor row as wide
  CHECK(pw.data.nbytes() - pn.data.nbytes() == size_t(((N + 15) / 16 + 1) * (K / 32) * 128));
  const OutputsButLast o = outputs_but_last_row(vn, vw, 5, 80);
  CHECK(same_bits(o.q8_a, o.q8_b));
  CHECK(same_bits(o.f32_a, o.f32_b));
}

TEST_CASE("narrow 4- and 3-bit codes (Q3_K's -4..3): the plain 4-bit kernels plus the base, the 8-bit weight's "
          "int8 bits") {
  int cases = 0;
  for (int bits : {4, 3})
    for (int base : {-4, -8, 0, 100})
      for (int group : {16, 32, 64})
        for (ScaleType st : {ScaleType::F16, ScaleType::F32, ScaleType::Factored}) {
          const int zero = cases % 2 ? 0 : -1;
          const int64_t N = 16 * 2 + 1 + cases % 5, K = 512;
          INFO("bits " << bits << " base " << base << " group " << group << " scale type " << int(st) << " zero "
                       << zero);
          NarrowPair p;
          make_narrow(p, bits, base, group, st, zero, N, K, uint32_t(1700 + 10 * cases));
          if (bits == 3)  // 192 code bytes a block of 32 inputs x 16 rows against 4 bits' 256
            CHECK(kernels::qweight_rowlane_block_bytes(4, K, group, st, zero) -
                      kernels::qweight_rowlane_block_bytes(3, K, group, st, zero) ==
                  K / 32 * 64);
          for (int64_t T : {1, 2, 3, 5, 9, 13}) check_narrow_kernels(p, T, 3 + T, uint32_t(1900 + T));
          if (cases % 8 == 0) check_narrow_kernels(p, 35, 8, 1935, true);  // AMX's tiles of 16 and a rest
          ++cases;
        }
  CHECK(cases == 72);
  if (kernels::detail::cpu_has_avx512_vnni()) {  // 3-bit codes: refused by the AVX-512 row-lane kernels
    NarrowPair p;
    make_narrow(p, 3, -4, 32, ScaleType::F16, -1, 16, 64, 1999);
    const auto x = randn(64, 3);
    const ActBuf a(x.data(), 1, 64);
    std::vector<float> o(16);
    CHECK_THROWS_AS(kernels::detail::qlinear_rows_q8_rowlane_avx512(a.q, p.vn, nullptr, 0, 16, o.data(), 16),
                    KernelError);
    CHECK_THROWS_AS(kernels::detail::qlinear_rows_f32_rowlane_avx512(x.data(), 1, p.vn, nullptr, 0, 16, o.data(), 16),
                    KernelError);
  }
  std::vector<uint8_t> codes(size_t(16 * 64), 0), out(size_t(1 << 16));
  codes[9] = 16;  // 16 past the base 0: not 4-bit narrow
  std::vector<float> sc(size_t(16 * 2), 1.0f), of(size_t(16 * 2), 0.0f);
  CHECK_THROWS_AS(kernels::qweight_pack_rowlane(4, 16, 64, 32, ScaleType::F32, codes.data(), sc.data(), of.data(),
                                                out.data(), -1, 0),
                  KernelError);
}

TEST_CASE("CpuBackend packing: Q3_K-like codes (-4..3) become narrow 3-bit codes where the kernels take them "
          "(else 4)") {
  const int64_t N = 40, K = 256;
  QW q = make_qw(8, 16, N, K, ScaleType::F32, 87);
  draw_codes(q, kBooks[1], 88);
  kquant_params(q, 0, 89);
  const LinearWeight c = canonical_weight(q, DType::I8);
  LinearWeight book = c;  // a far code in the last row: 9 values over 104, a codebook
  book.data = Tensor::empty_host(DType::I8, {N, K});
  std::memcpy(book.data.data, q.codes.data(), q.codes.size());
  book.data.ptr<int8_t>()[N * K - 1] = 100;
  const LinearWeight pn = pack_cpu_quantized(c), pb = pack_cpu_quantized(book);
  const kernels::QWeightView vn = cpu_qweight_view(pn), vb = cpu_qweight_view(pb);
  if (!kernels::qweight_compact_codes_ok(vn.layout)) {
    CHECK(vn.narrow_base == kernels::kWideCodes);
    CHECK(vn.codebook == nullptr);
    return;
  }
  const bool three = kernels::qweight_three_bit_ok();
  CHECK(vn.bits == (three ? 3 : 4));
  CHECK(vn.narrow_base == -4);
  CHECK(vn.codebook == nullptr);
  CHECK(vb.codebook != nullptr);  // 9 values: 4-bit positions
  CHECK(vb.bits == 4);
  CHECK(vb.narrow_base == kernels::kWideCodes);
  // 3 bits: 64 code bytes fewer a block of 32 inputs, in each row block and in the descriptor row
  CHECK(pb.data.nbytes() - pn.data.nbytes() == (three ? size_t(((N + 15) / 16 + 1) * (K / 32) * 64) : 0));
  // the same values in the same order: the same bits in both modes on the other rows
  const OutputsButLast o = outputs_but_last_row(vn, vb, 5, 90);
  CHECK(same_bits(o.q8_a, o.q8_b));
  CHECK(same_bits(o.f32_a, o.f32_b));
}

TEST_CASE("CpuBackend packing: Q2_K-like 4-bit codes (0..3) are kept as 2-bit codes, the 4-bit packing's bits") {
  for (int group : {16, 32}) {
    const int64_t N = 40, K = 256;
    QW q = make_qw(4, group, N, K, ScaleType::F32, uint32_t(91 + group));
    std::mt19937 rng(uint32_t(92 + group));
    for (auto& c : q.codes) c = uint8_t(rng() % 4);
    kquant_params(q, -1, uint32_t(93 + group));  // scales d x sc, offsets -(dmin x m): Q2_K's
    const LinearWeight c = canonical_weight(q);
    LinearWeight four = c;  // one code of the last row past 3: 4-bit codes
    four.data = Tensor::empty_host(DType::U8, {N, K});
    std::memcpy(four.data.data, q.codes.data(), q.codes.size());
    four.data.ptr<uint8_t>()[N * K - 1] = 9;
    const LinearWeight p2 = pack_cpu_quantized(c), p4 = pack_cpu_quantized(four);
    const kernels::QWeightView v2 = cpu_qweight_view(p2), v4 = cpu_qweight_view(p4);
    INFO("group " << group << " layout " << int(v2.layout));
    CHECK(v4.bits == 4);
    if (v2.layout != QLayout::RowLane16) {  // the Rows layout keeps 4 bits
      CHECK(v2.bits == 4);
      continue;
    }
    CHECK(v2.bits == 2);
    CHECK(v2.narrow_base == kernels::kWideCodes);
    // 128 code bytes a block of 32 inputs, not 256, in each row block and in the descriptor row as 4-bit
    CHECK(p4.data.nbytes() - p2.data.nbytes() == size_t(((N + 15) / 16 + 1) * (K / 32) * 128));
    // the same codes, integers and f32 operations in the same order: the same bits in both modes
    for (int64_t T : {1, 3, 6}) {
      const OutputsButLast o = outputs_but_last_row(v2, v4, T, uint32_t(94 + T));
      CHECK(same_bits(o.q8_a, o.q8_b));
      CHECK(same_bits(o.f32_a, o.f32_b));
    }
  }
}
