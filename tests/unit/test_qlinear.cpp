// Quantized linear kernels (kernels/cpu/qlinear.h): every variant this CPU runs against a naive
// double-precision reference on random codes, scales, offsets and activations; batch invariance
// (T rows together = each row alone, a split of [0, N) = one call, bit for bit); pack/unpack; the
// int8 activations' own error; and the CPU backend through Backend::linear(x, LinearWeight).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cpu/cpu_quantized_weight.h"
#include "engine/core/dtype.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/qlinear.h"
#include "kernels/cpu/qlinear_impl.h"
#include "kernels/cpu/qlinear_token_tiles.h"
#include "kernels/cpu/qweight_factored_impl.h"
#include "kernels/kernel_check.h"
#include "tests/unit/qlinear_test_util.h"
#include "tests/unit/skip.h"

using namespace llmctl;
using namespace llmctl::qtest;
using kernels::ActQuant;
using kernels::ScaleType;

TEST_CASE("qweight_pack: documented layout and round trip") {
  for (int bits : {4, 8}) {
    const int64_t n = 5, k = 96;
    const QW q = make_qw(bits, 32, n, k, ScaleType::F32, 11 + bits);
    CHECK(kernels::qweight_row_bytes(bits, k) == (bits == 4 ? 48 : 96));
    if (bits == 4)  // byte j of a block: input j in the low nibble, input j + 16 in the high one
      for (int64_t r = 0; r < n; ++r)
        for (int64_t b = 0; b < k / 32; ++b)
          for (int j = 0; j < 16; ++j) {
            const uint8_t byte = q.packed[size_t(r * 48 + b * 16 + j)];
            CHECK((byte & 0xF) == q.codes[size_t(r * k + b * 32 + j)]);
            CHECK((byte >> 4) == q.codes[size_t(r * k + b * 32 + j + 16)]);
          }
    std::vector<uint8_t> back(size_t(n * k), 0xAA);
    kernels::qweight_unpack(bits, n, k, q.packed.data(), back.data());
    CHECK(back == q.codes);
  }
}

TEST_CASE("qweight_pack_rowlane: documented layout and round trip") {
  for (int bits : {4, 8})
    for (ScaleType st : {ScaleType::F32, ScaleType::F16}) {
      const int64_t n = 19, k = 192;  // two row blocks, the second padded; groups of 64
      const int group = 64;
      const QW q = make_qw(bits, group, n, k, st, uint32_t(21 + bits)).as(kernels::QLayout::RowLane16);
      const int64_t ps = st == ScaleType::F16 ? 2 : 4, cb = bits == 4 ? 256 : 512, gb = 2 * cb + 32 * ps;
      REQUIRE(kernels::qweight_rowlane_block_bytes(bits, k, group, st) == 3 * gb);
      REQUIRE(q.packed.size() == size_t(2 * 3 * gb));
      int bad = 0;
      for (int64_t row = 0; row < 32; ++row)
        for (int64_t c = 0; c < k; ++c) {
          const int r = int(row % 16), b = int(c % group / 32), i = int(c % 32);
          const uint8_t* blk = q.packed.data() + (row / 16) * 3 * gb + (c / group) * gb + b * cb;
          // 4 bits: vector (i % 16) / 4, byte 4r + i % 4, low nibble for i < 16; 8 bits: vector i / 4, code ^ 0x80
          const int got = bits == 4 ? (blk[(i % 16) / 4 * 64 + 4 * r + i % 4] >> (i < 16 ? 0 : 4)) & 0xF
                                    : int(int8_t(blk[i / 4 * 64 + 4 * r + i % 4] ^ 0x80));
          const int want = row < n ? (bits == 4 ? int(q.codes[size_t(row * k + c)]) : int(int8_t(q.codes[size_t(row * k + c)]))) : 0;
          if (got != want) ++bad;
          if (c % group == 0) {  // the group's scales, then offsets, after its codes
            const uint8_t* params = q.packed.data() + (row / 16) * 3 * gb + (c / group) * gb + 2 * cb;
            const int64_t gi = row * (k / group) + c / group;
            const bool ok = row >= n ? (std::memcmp(params + r * ps, "\0\0\0\0", size_t(ps)) == 0 &&
                                        std::memcmp(params + 16 * ps + r * ps, "\0\0\0\0", size_t(ps)) == 0)
                            : st == ScaleType::F32
                                ? std::memcmp(params + r * ps, &q.scale_f32[size_t(gi)], 4) == 0 &&
                                      std::memcmp(params + 16 * ps + r * ps, &q.offset_f32[size_t(gi)], 4) == 0
                                : std::memcmp(params + r * ps, &q.scale_f16[size_t(gi)], 2) == 0 &&
                                      std::memcmp(params + 16 * ps + r * ps, &q.offset_f16[size_t(gi)], 2) == 0;
            if (!ok) ++bad;
          }
        }
      CHECK(bad == 0);
      std::vector<uint8_t> back(size_t(n * k), 0xAA);
      kernels::qweight_unpack_rowlane(bits, n, k, group, st, q.packed.data(), back.data());
      CHECK(back == q.codes);
    }
  // Groups of 16: a unit is one block of 32 inputs, its codes, then the scales of its two groups,
  // then their offsets.
  for (int bits : {4, 8}) {
    const int64_t n = 19, k = 96;
    const QW q = make_qw(bits, 16, n, k, ScaleType::F32, uint32_t(31 + bits)).as(kernels::QLayout::RowLane16);
    const int64_t cb = bits == 4 ? 256 : 512, ub = cb + 4 * 64;
    REQUIRE(kernels::qweight_rowlane_block_bytes(bits, k, 16, ScaleType::F32) == 3 * ub);
    int bad = 0;
    for (int64_t row = 0; row < n; ++row)
      for (int64_t g = 0; g < k / 16; ++g) {
        const uint8_t* params = q.packed.data() + (row / 16) * 3 * ub + (g / 2) * ub + cb;
        const int r = int(row % 16), h = int(g % 2);
        const int64_t gi = row * (k / 16) + g;
        bad += std::memcmp(params + h * 64 + r * 4, &q.scale_f32[size_t(gi)], 4) != 0;
        bad += std::memcmp(params + (2 + h) * 64 + r * 4, &q.offset_f32[size_t(gi)], 4) != 0;
      }
    CHECK(bad == 0);
    std::vector<uint8_t> back(size_t(n * k), 0xAA);
    kernels::qweight_unpack_rowlane(bits, n, k, 16, ScaleType::F32, q.packed.data(), back.data());
    CHECK(back == q.codes);
  }
  CHECK_THROWS(kernels::qweight_rowlane_block_bytes(4, 96, 48, ScaleType::F32));  // neither 16 nor a multiple of 32
  // The codes of the block of 32 inputs holding column c of `row` in a row-lane weight of K = 128 (two
  // row blocks), units of ub bytes, blocks of cb code bytes.
  auto block_at = [](const uint8_t* packed, int64_t row, int64_t c, int group, int64_t ub, int64_t cb) {
    const int64_t k = 128, unit = group == 16 ? c / 32 : c / group, b = group == 16 ? 0 : c % group / 32;
    return packed + (row / 16) * (k / std::max(group, 32)) * ub + unit * ub + b * cb;
  };
  // 2 bits: per block of 32 inputs 2 vectors of 64 bytes; the 4-bit layout's vector v is vector
  // v / 2's bytes >> 2 (v % 2), masked 0x33 (qlinear.h), its nibbles the codes as 4 bits stores them.
  for (int group : {16, 64}) {
    const int64_t n = 19, k = 128;
    const QW q = make_qw(2, group, n, k, ScaleType::F16, uint32_t(41 + group)).as(kernels::QLayout::RowLane16);
    const int64_t ub = 128 * (group == 16 ? 1 : 2) + (group == 16 ? 2 : 1) * 2 * 32;  // codes, scales, offsets
    REQUIRE(kernels::qweight_rowlane_block_bytes(2, k, group, ScaleType::F16) == k / std::max(group, 32) * ub);
    int bad = 0;
    for (int64_t row = 0; row < 32; ++row)
      for (int64_t c = 0; c < k; ++c) {
        const int r = int(row % 16), i = int(c % 32), v = (i % 16) / 4;
        const uint8_t* blk = block_at(q.packed.data(), row, c, group, ub, 128);
        const int four_bit_byte = (blk[v / 2 * 64 + 4 * r + i % 4] >> (2 * (v % 2))) & 0x33;
        const int got = (four_bit_byte >> (i < 16 ? 0 : 4)) & 0xF;
        const int want = row < n ? int(q.codes[size_t(row * k + c)]) : 0;
        if (got != want) ++bad;
      }
    CHECK(bad == 0);
    std::vector<uint8_t> back(size_t(n * k), 0xAA);
    kernels::qweight_unpack_rowlane(2, n, k, group, ScaleType::F16, q.packed.data(), back.data());
    CHECK(back == q.codes);
    // a code that needs more than 2 bits, or 2-bit codes from a base, are refused
    std::vector<uint8_t> wide = q.codes, out(q.packed.size());
    wide[5] = 4;
    CHECK_THROWS(kernels::qweight_pack_rowlane(2, n, k, group, ScaleType::F16, wide.data(), q.scales(), q.offsets(),
                                               out.data()));
    CHECK_THROWS(kernels::qweight_pack_rowlane(2, n, k, group, ScaleType::F16, q.codes.data(), q.scales(),
                                               q.offsets(), out.data(), -1, 0));
  }
  // 3 bits: per block of 32 inputs 3 vectors of 64 bytes: the 4-bit layout's vector v < 3 is vector v &
  // 0x77, its vector 3 gathers bit v of each nibble's top bit (qlinear.h). Plain codes 0..7, and narrow
  // ones (code - base).
  for (int group : {16, 64})
    for (int base : {kernels::kWideCodes, -4, 9}) {
      const int64_t n = 19, k = 128;
      QW q = make_qw(3, group, n, k, ScaleType::F16, uint32_t(51 + group));
      if (base != kernels::kWideCodes)
        for (auto& c : q.codes) c = uint8_t(int8_t(int(c) + base));
      std::vector<uint8_t> packed(size_t(2 * kernels::qweight_rowlane_block_bytes(3, k, group, ScaleType::F16)), 0xEE);
      kernels::qweight_pack_rowlane(3, n, k, group, ScaleType::F16, q.codes.data(), q.scales(), q.offsets(),
                                    packed.data(), -1, base);
      const int64_t ub = 192 * (group == 16 ? 1 : 2) + (group == 16 ? 2 : 1) * 2 * 32;  // codes, scales, offsets
      REQUIRE(kernels::qweight_rowlane_block_bytes(3, k, group, ScaleType::F16) == k / std::max(group, 32) * ub);
      int bad = 0;
      for (int64_t row = 0; row < 32; ++row)
        for (int64_t c = 0; c < k; ++c) {
          const int r = int(row % 16), i = int(c % 32), v = (i % 16) / 4;
          const uint8_t* blk = block_at(packed.data(), row, c, group, ub, 192);
          auto at = [&](int q) { return int(blk[64 * q + 4 * r + i % 4]); };
          const int four_bit_byte = v < 3 ? at(v) & 0x77
                                          : ((at(0) >> 3) & 0x11) | ((at(1) >> 2) & 0x22) | ((at(2) >> 1) & 0x44);
          const int got = (four_bit_byte >> (i < 16 ? 0 : 4)) & 0xF;
          const int code = int(int8_t(q.codes[size_t(std::min<int64_t>(row, n - 1) * k + c)]));
          const int want = row < n ? code - (base == kernels::kWideCodes ? 0 : base) : 0;
          if (got != want) ++bad;
        }
      INFO("group " << group << " base " << base);
      CHECK(bad == 0);
      std::vector<uint8_t> back(size_t(n * k), 0xAA);
      kernels::qweight_unpack_rowlane(3, n, k, group, ScaleType::F16, packed.data(), back.data(), -1, base);
      CHECK(back == q.codes);
      // a code past 3 bits (of its base) is refused
      std::vector<uint8_t> wide = q.codes;
      wide[7] = uint8_t(int8_t((base == kernels::kWideCodes ? 0 : base) + 8));
      CHECK_THROWS_AS(kernels::qweight_pack_rowlane(3, n, k, group, ScaleType::F16, wide.data(), q.scales(),
                                                    q.offsets(), packed.data(), -1, base),
                      KernelError);
    }
}

TEST_CASE("row-lane kernels: AMX, AVX-512 and AVX2 equal the scalar reference bit for bit; T = 1..9, 16, 35 "
          "(and past one prefill token chunk), odd N, any split") {
  struct RowLaneSimd {
    const char* name;
    decltype(&kernels::detail::qlinear_rows_q8_rowlane_scalar) q8;
    decltype(&kernels::detail::qlinear_rows_f32_rowlane_scalar) f32;
  };
  std::vector<RowLaneSimd> simds;
  if (kernels::detail::cpu_has_avx512_vnni())
    simds.push_back({"avx512", kernels::detail::qlinear_rows_q8_rowlane_avx512, kernels::detail::qlinear_rows_f32_rowlane_avx512});
  else
    MESSAGE("this CPU has no AVX-512 VNNI: the AVX-512 row-lane kernels are not tested here");
  if (kernels::cpu_has_avx2())
    simds.push_back({"avx2", kernels::detail::qlinear_rows_q8_rowlane_avx2, kernels::detail::qlinear_rows_f32_rowlane_avx2});
  else
    MESSAGE("this CPU has no AVX2/FMA/F16C: the AVX2 row-lane kernels are not tested here");
  if (kernels::detail::cpu_has_avx_vnni())  // its int8 kernel (its f32 mode is AVX2's)
    simds.push_back({"avx-vnni", kernels::detail::qlinear_rows_q8_rowlane_avxvnni, kernels::detail::qlinear_rows_f32_rowlane_avx2});
  else
    MESSAGE("this CPU has no AVX-VNNI: the AVX-VNNI row-lane kernel is not tested here");
  if (kernels::detail::cpu_has_amx_int8())  // its int8 prompts (its f32 mode is AVX-512's)
    simds.push_back(
        {"amx", kernels::detail::qlinear_rows_q8_rowlane_amx, kernels::detail::qlinear_rows_f32_rowlane_avx512});
  else
    MESSAGE("this CPU (or its OS) has no AMX-INT8: the AMX row-lane prefill is not tested here");
  if (simds.empty()) LLMCTL_SKIP("no SIMD row-lane kernel runs on this CPU (the scalar reference is checked in the table test)");
  for (const RowLaneSimd& sv : simds) {
    int cases = 0;
    // 3-bit codes: the AVX2 / AVX-VNNI kernels' alone (qweight_three_bit_ok)
    const bool three = sv.q8 != kernels::detail::qlinear_rows_q8_rowlane_avx512 &&
                       sv.q8 != kernels::detail::qlinear_rows_q8_rowlane_amx;
    for (int bits : {2, 3, 4, 8})
      for (ScaleType st : {ScaleType::F16, ScaleType::F32})
        for (int64_t K : {96, 160, 576})
          for (int group : {16, 32, 96, 160}) {
            if (K % group || (bits == 3 && !three)) continue;
            const int64_t N = 16 * (2 + cases % 3) + 7 + 2 * (cases % 4);  // odd, a partial last row block
            const QW q = make_qw(bits, group, N, K, st, uint32_t(500 + cases)).as(kernels::QLayout::RowLane16);
            // every token count a tile sees (AMX: one tile of 16, two and a rest); a prefill longer than
            // one token chunk (its chunks' seam)
            std::vector<int64_t> counts = {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 35};
            if (cases % 6 == 0) counts.push_back(kernels::detail::kTokenChunk + 23);  // AMX: a tile past the seam
            for (int64_t T : counts) {
              const auto x = randn(size_t(T * K), uint32_t(600 + cases * 10 + T)), bias = randn(size_t(N), uint32_t(7 + T));
              const ActBuf a(x.data(), T, K);
              const float* bp = T % 2 ? bias.data() : nullptr;
              for (bool i8 : {false, true}) {
                auto run = [&](bool simd, int64_t n0, int64_t n1, std::vector<float>& out) {
                  if (i8)
                    (simd ? sv.q8 : kernels::detail::qlinear_rows_q8_rowlane_scalar)(a.q, q.view(), bp, n0, n1, out.data(), N);
                  else
                    (simd ? sv.f32 : kernels::detail::qlinear_rows_f32_rowlane_scalar)(x.data(), T, q.view(), bp, n0, n1,
                                                                                     out.data(), N);
                };
                std::vector<float> ref(size_t(T * N), NAN), simd(size_t(T * N), NAN), split(size_t(T * N), NAN);
                run(false, 0, N, ref);
                run(true, 0, N, simd);
                const int64_t c1 = 5 + T % 10, c2 = N - 3 - T % 10;  // cuts inside row blocks
                run(true, 0, c1, split), run(true, c1, c2, split), run(true, c2, N, split);
                INFO(std::string(sv.name) << " bits " << bits << " K " << K << " group " << group << " N " << N
                                          << " T " << T << std::string(i8 ? " int8" : " f32"));
                CHECK(same_bits(ref, simd));
                CHECK(same_bits(ref, split));
                if (i8 && T >= 4) {
                  // the prefill tiles of the activations: the quantizer's where the chosen kernels read
                  // them (a.q, above), built here for this kernel (AMX: 16 tokens, else 4), and none (the
                  // kernel builds its own)
                  const bool amx = sv.q8 == kernels::detail::qlinear_rows_q8_rowlane_amx;
                  for (int rows : {amx ? 16 : 4, 0}) {
                    if (rows > T) continue;
                    std::vector<float> o(size_t(T * N), NAN);
                    if (rows)
                      sv.q8(TileBuf(a.q, rows).view, q.view(), bp, 0, N, o.data(), N);
                    else
                      sv.q8(without_tiles(a.q), q.view(), bp, 0, N, o.data(), N);
                    INFO("activation tiles of " << rows);
                    CHECK(same_bits(ref, o));
                  }
                  // and tokens from the third on (a view whose tiles start off the quantizer's)
                  std::vector<float> late(size_t((T - 3) * N), NAN);
                  sv.q8(kernels::qactivation_rows(a.q, 3, T), q.view(), bp, 0, N, late.data(), N);
                  CHECK(std::memcmp(late.data(), ref.data() + 3 * N, late.size() * 4) == 0);
                }
                // and the token rows one at a time
                std::vector<float> alone(size_t(T * N), NAN);
                for (int64_t t = 0; t < T; ++t) {
                  if (i8) {
                    kernels::QActivations rows = a.q;
                    rows.t = 1, rows.q += t * K, rows.scale += t * K / 32, rows.sum += t * K / 16;
                    rows.half_sum += t * K / 16;
                    sv.q8(rows, q.view(), bp, 0, N, alone.data() + t * N, N);
                  } else {
                    sv.f32(x.data() + t * K, 1, q.view(), bp, 0, N, alone.data() + t * N, N);
                  }
                }
                CHECK(same_bits(ref, alone));
              }
            }
            ++cases;
          }
    CHECK(cases == (three ? 72 : 54));
    // a Rows view given to a row-lane kernel is refused, not misread
    const QW rows = make_qw(4, 32, 16, 64, ScaleType::F32, 9);
    const auto x = randn(64, 10);
    std::vector<float> o(16);
    CHECK_THROWS(sv.f32(x.data(), 1, rows.view(), nullptr, 0, 16, o.data(), 16));
  }
  const QW rows = make_qw(4, 32, 16, 64, ScaleType::F32, 9);
  const auto x = randn(64, 10);
  std::vector<float> o(16);
  CHECK_THROWS(kernels::detail::qlinear_rows_f32_rowlane_scalar(x.data(), 1, rows.view(), nullptr, 0, 16, o.data(), 16));
}

TEST_CASE("weight prefetch (select_cpu_kernels): 'all' and 'wide' give the scalar reference's bits in decode; "
          "an unknown name is refused") {
  if (!kernels::cpu_has_avx2()) LLMCTL_SKIP("this CPU has no AVX2/FMA/F16C: no tile takes the prefetch choice");
  // the run's own choice of kernels, kept: the AVX2 tiles read the prefetch choice whichever runs
  const std::string isa = kernels::qlinear_amx() ? "amx" : kernels::qlinear_isa();
  const bool rows_layout = kernels::detail::rows_layout_selected();
  struct Restore {  // the run's own choice back, whatever a check does
    std::string isa;
    bool rows;
    ~Restore() { kernels::select_cpu_kernels(isa, rows, "auto"); }
  } restore{isa, rows_layout};
  CHECK_THROWS_AS(kernels::select_cpu_kernels(isa, rows_layout, "some"), KernelError);
  for (const char* mode : {"all", "wide"}) {
    kernels::select_cpu_kernels(isa, rows_layout, mode);
    CHECK(std::string(kernels::qlinear_prefetch()) == mode);
    std::vector<decltype(&kernels::detail::qlinear_rows_q8_rowlane_avx2)> tiles = {
        kernels::detail::qlinear_rows_q8_rowlane_avx2};
    if (kernels::detail::cpu_has_avx_vnni()) tiles.push_back(kernels::detail::qlinear_rows_q8_rowlane_avxvnni);
    for (int bits : {2, 3, 4, 8})  // 2, 3 and 4 bits prefetched by 'all' only, wide 8 bits by both
      for (int group : {16, 32}) {
        // 5 row blocks and a partial one of 6-20 KB each: the prefetches 8 KB ahead run past the weight's end
        const int64_t N = 16 * 5 + 3, K = 1024;
        const QW q = make_qw(bits, group, N, K, ScaleType::F16, uint32_t(40 + bits + group))
                         .as(kernels::QLayout::RowLane16);
        for (int64_t T : {1, 2, 3}) {
          const auto x = randn(size_t(T * K), uint32_t(50 + T));
          const ActBuf a(x.data(), T, K);
          std::vector<float> ref(size_t(T * N), NAN), out(size_t(T * N), NAN);
          kernels::detail::qlinear_rows_q8_rowlane_scalar(a.q, q.view(), nullptr, 0, N, ref.data(), N);
          for (size_t i = 0; i < tiles.size(); ++i) {
            tiles[i](a.q, q.view(), nullptr, 0, N, out.data(), N);
            INFO(mode << (i ? " avx-vnni" : " avx2") << " bits " << bits << " group " << group << " T " << T);
            CHECK(same_bits(ref, out));
          }
        }
      }
  }
}

TEST_CASE("row-lane implied zero points (Q4_0: offset -8 x scale, Q8_0: 0): same bits, offsets not stored") {
  for (int bits : {4, 8})
    for (ScaleType st : {ScaleType::F16, ScaleType::F32})
      for (int z : {0, 8}) {
        if (z == 8 && bits == 8) continue;
        const int64_t N = 37, K = 160;
        const int group = 32;
        QW q = make_qw(bits, group, N, K, st, uint32_t(70 + bits + z));
        for (size_t i = 0; i < q.scale_f32.size(); ++i) {  // offsets := -z * scale, exactly
          q.offset_f32[i] = kernels::detail::implied_offset(z, q.scale_f32[i]);
          if (st == ScaleType::F16) q.offset_f16[i] = f32_to_f16(q.offset_f32[i]);
        }
        REQUIRE(kernels::qweight_implied_zero(bits, N, K, group, st, q.scales(), q.offsets()) == z);
        const QW stored = q.as(kernels::QLayout::RowLane16), implied = q.as(kernels::QLayout::RowLane16, z);
        CHECK(implied.packed.size() < stored.packed.size());
        std::vector<uint8_t> back(size_t(N * K));
        kernels::qweight_unpack_rowlane(bits, N, K, group, st, implied.packed.data(), back.data(), z);
        CHECK(back == q.codes);
        const int64_t T = 5;
        const auto x = randn(size_t(T * K), 80), bias = randn(size_t(N), 81);
        const ActBuf a(x.data(), T, K);
        for (const Variant& v : variants()) {
          std::vector<float> o1(size_t(T * N)), o2(size_t(T * N)), f1(size_t(T * N)), f2(size_t(T * N));
          v.q8(a.q, stored.view(), bias.data(), 0, N, o1.data(), N);
          v.q8(a.q, implied.view(), bias.data(), 0, N, o2.data(), N);
          v.f32(x.data(), T, stored.view(), bias.data(), 0, N, f1.data(), N);
          v.f32(x.data(), T, implied.view(), bias.data(), 0, N, f2.data(), N);
          INFO(v.name << " bits " << bits << " z " << z << (st == ScaleType::F16 ? " f16" : " f32"));
          CHECK(same_bits(o1, o2));
          CHECK(same_bits(f1, f2));
        }
        // one offset off by a bit: not implied
        q.offset_f32[7] = std::nextafter(q.offset_f32[7], 1.0f);
        if (st == ScaleType::F16) q.offset_f16[7] = uint16_t(q.offset_f16[7] ^ 1);
        CHECK(kernels::qweight_implied_zero(bits, N, K, group, st, q.scales(), q.offsets()) == -1);
      }
}

TEST_CASE("factored scales (GGUF K-quants' d x sc, dmin x m), both layouts: the f32 scales' bits in fewer bytes") {
  using kernels::QLayout;
  for (int bits : {4, 8})
    for (int group : {16, 32, 64})
      for (int z : {-1, 0}) {  // offsets stored (Q4_K / Q5_K / Q2_K), none: -0 (IQ4_XS / Q6_K / Q3_K)
        const int64_t N = 37, K = 512, G = K / group;
        QW q = make_qw(bits, group, N, K, ScaleType::F32, uint32_t(90 + bits + group + z));
        kquant_params(q, z, uint32_t(7 + bits + group));
        INFO("bits " << bits << " group " << group << " z " << z);
        REQUIRE(kernels::qweight_implied_zero(bits, N, K, group, ScaleType::F32, q.scales(), q.offsets()) == z);
        kernels::FactoredParams fs, fo;
        REQUIRE(kernels::qweight_factor(N, K, group, q.scale_f32.data(), &fs));
        REQUIRE(kernels::qweight_factor(N, K, group, q.offset_f32.data(), &fo));
        for (QLayout layout : {QLayout::Rows, QLayout::RowLane16}) {
          const bool lane = layout == QLayout::RowLane16;
          INFO(std::string(lane ? "row-lane" : "rows"));
          // The f32 weight, and the factored one: row-lane packs the factors; Rows points at them
          // (Rows keeps -0 offsets out: z = 0 there is a null offset, as the backend packs it).
          QW plain = q.as(layout, lane ? z : -1), factored = plain;
          factored.st = ScaleType::Factored;
          if (lane) {
            factored.packed.assign(size_t((N + 15) / 16 * kernels::qweight_rowlane_block_bytes(bits, K, group, ScaleType::Factored, z)), 0xEE);
            kernels::qweight_pack_rowlane(bits, N, K, group, ScaleType::Factored, q.codes.data(), &fs, &fo,
                                          factored.packed.data(), z);
            const double ratio = double(factored.packed.size()) / double(plain.packed.size());
            MESSAGE("row-lane bits " << bits << " group " << group << " z " << z << ": " << ratio << " of the f32-scale bytes");
            CHECK(ratio < 1.0);
            std::vector<uint8_t> back(size_t(N * K));
            kernels::qweight_unpack_rowlane(bits, N, K, group, ScaleType::Factored, factored.packed.data(), back.data(), z);
            CHECK(back == q.codes);
          }
          auto view_of = [&](const QW& w, bool f) {
            kernels::QWeightView v = w.view();
            if (!lane && f) {
              v.scale = fs.m.data(), v.scale_d = fs.d.data();
              v.offset = z == 0 ? nullptr : static_cast<const void*>(fo.m.data()), v.offset_d = z == 0 ? nullptr : fo.d.data();
            }
            if (!lane && !f && z == 0) v.offset = nullptr;
            return v;
          };
          const kernels::QWeightView pv = view_of(plain, false), fv = view_of(factored, true);
          std::vector<float> rp(static_cast<size_t>(K)), rf(static_cast<size_t>(K));
          for (int64_t r : {int64_t(0), int64_t(17), N - 1}) {
            kernels::qweight_dequantize_row(pv, r, rp.data());
            kernels::qweight_dequantize_row(fv, r, rf.data());
            CHECK(same_bits(rp, rf));
          }
          for (int64_t T : {1, 3, 6}) {
            const auto x = randn(size_t(T * K), uint32_t(100 + T)), bias = randn(size_t(N), 101);
            const ActBuf a(x.data(), T, K);
            for (const Variant& v : variants()) {
              if ((!lane || group == 16) && std::string(v.name) == "avx512") continue;  // Rows / f32 there
              for (auto [n0, n1] : {std::pair<int64_t, int64_t>{0, N}, {5, 30}}) {
                INFO(v.name << " T " << T << " rows " << n0 << ".." << n1);
                std::vector<float> o1(size_t(T * N)), o2(size_t(T * N)), f1(size_t(T * N)), f2(size_t(T * N));
                v.q8(a.q, pv, bias.data(), n0, n1, o1.data(), N);
                v.q8(a.q, fv, bias.data(), n0, n1, o2.data(), N);
                v.f32(x.data(), T, pv, bias.data(), n0, n1, f1.data(), N);
                v.f32(x.data(), T, fv, bias.data(), n0, n1, f2.data(), N);
                CHECK(same_bits(o1, o2));
                CHECK(same_bits(f1, f2));
              }
            }
          }
        }
        // One scale an ulp off, random f32 scales, or groups not whole runs of 8: no factors.
        std::vector<float> nudged = q.scale_f32;
        nudged[size_t(3 * G + 5)] = std::nextafter(nudged[size_t(3 * G + 5)], 1.0f);
        kernels::FactoredParams none;
        CHECK_FALSE(kernels::qweight_factor(N, K, group, nudged.data(), &none));
        const QW rnd = make_qw(bits, group, N, K, ScaleType::F32, 5);
        CHECK_FALSE(kernels::qweight_factor(N, K, group, rnd.scale_f32.data(), &none));
        CHECK_FALSE(kernels::qweight_factor(N, 7 * group, group, q.scale_f32.data(), &none));
      }
  // Factors of the wrong size are refused by the packer; a Rows view without its D by the kernels.
  kernels::FactoredParams small;
  small.m.resize(8), small.d.resize(1);
  std::vector<uint8_t> codes(size_t(16 * 256)), out(1 << 16);
  CHECK_THROWS_AS(kernels::qweight_pack_rowlane(4, 16, 256, 32, ScaleType::Factored, codes.data(), &small, &small,
                                                out.data(), -1),
                  KernelError);
  QW r = make_qw(4, 32, 16, 256, ScaleType::F32, 3);
  kernels::QWeightView v = r.view();
  v.scale_type = ScaleType::Factored;
  std::vector<float> row(256);
  CHECK_THROWS_AS(kernels::qweight_dequantize_row(v, 0, row.data()), KernelError);
}

TEST_CASE("factor_values: every value reproduced, zeros with their signs, or none") {
  uint16_t d = 0;
  int8_t m[4];
  const float dh = f16_to_f32(f32_to_f16(0.0123f));
  auto reproduced = [&](const float* v) {
    for (int i = 0; i < 4; ++i) {
      const float p = f16_to_f32(d) * float(m[i]);
      if (std::memcmp(&p, &v[i], 4) != 0) return false;
    }
    return true;
  };
  const float pos[4] = {dh * 5.0f, 0.0f, dh * -17.0f, dh * 63.0f};  // +0 needs D > 0: 63 x dh
  REQUIRE(kernels::detail::factor_values(pos, 4, &d, m));
  CHECK(reproduced(pos));
  CHECK(f16_to_f32(d) > 0);
  const float neg[4] = {dh * 5.0f, -0.0f, dh * -17.0f, dh * 63.0f};  // -0 needs D < 0: -63 x -dh
  REQUIRE(kernels::detail::factor_values(neg, 4, &d, m));
  CHECK(reproduced(neg));
  CHECK(f16_to_f32(d) < 0);
  const float zeros[4] = {-0.0f, 0.0f, -0.0f, 0.0f};  // d = 0 in a file: D = +0, m = -1 for each -0
  REQUIRE(kernels::detail::factor_values(zeros, 4, &d, m));
  CHECK(reproduced(zeros));
  const float apart[4] = {dh * 5.0f, dh * 300.0f, dh, dh};  // 300 x dh over 127 x any f16 that divides the rest
  CHECK_FALSE(kernels::detail::factor_values(apart, 4, &d, m));
  const float nan[2] = {dh, std::nanf("")};
  CHECK_FALSE(kernels::detail::factor_values(nan, 2, &d, m));
}

TEST_CASE("factor_values: the AVX2 run of eight finds the scalar's D and m, or none, on random runs of every kind") {
  if (!kernels::cpu_has_avx2()) LLMCTL_SKIP("no AVX2 on this CPU");
  std::mt19937 rng(41);
  std::uniform_int_distribution<int> any(-128, 127);
  int found = 0, none = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    float v[8];
    const int kind = trial % 6;
    // d: an f16 of either sign, now and then subnormal or tiny
    const float mag = kind == 5 ? 1e-7f : std::uniform_real_distribution<float>(1e-5f, 2.0f)(rng);
    const float d = f16_to_f32(f32_to_f16(rng() % 2 ? mag : -mag));
    const int lo[4] = {0, -128, -32, 0}, hi[4] = {63, 127, 31, 15};
    const int range = int(rng() % 4);
    for (float& x : v) x = d * float(std::uniform_int_distribution<int>(lo[range], hi[range])(rng));
    if (kind == 1) v[rng() % 8] = std::nextafter(v[rng() % 8], 1.0f);  // one value off by an ulp
    if (kind == 2)
      for (float& x : v) x = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);  // no common D
    if (kind == 3)
      for (float& x : v) x = rng() % 2 ? 0.0f : -0.0f;  // zeros with their signs
    if (kind == 4) v[rng() % 8] = rng() % 2 ? std::nanf("") : INFINITY;
    if (kind == 5 && rng() % 2) v[rng() % 8] = d * float(any(rng)) * 300.0f;  // out of an int8's reach
    uint16_t ds = 0xFFFF, dv = 0xFFFF;
    int8_t ms[8], mv[8];
    // every other run with a hint: d (the previous run's D of its super-block) or an unrelated f16
    const uint16_t hint = trial % 2 ? 0 : trial % 4 ? f32_to_f16(d) : f32_to_f16(0.37f);
    const bool s = kernels::detail::factor_values_scalar(v, 8, &ds, ms, hint);
    const bool a = kernels::detail::factor_values8_avx2(v, &dv, mv, hint);
    REQUIRE(s == a);
    if (s) {
      CHECK(ds == dv);
      CHECK(std::memcmp(ms, mv, 8) == 0);
    }
    (s ? found : none)++;
  }
  CHECK(found > 5000);  // the kinds above give both outcomes often
  CHECK(none > 3000);
}

TEST_CASE("factor_values: a hint (the previous run's D) is tried before the search's last resort") {
  // the second run of a Q6_K-like super-block: d x m, the largest |m| 76 (at no end the search tries
  // first), every m even: the hint 2d reproduces the values as well as d does, and is taken when given
  const float d = f16_to_f32(f32_to_f16(0.0123f));
  const int ms[8] = {76, -12, 4, 0, -76, 32, 2, -2};
  float v[8];
  for (int i = 0; i < 8; ++i) v[i] = d * float(ms[i]);
  for (bool simd : {false, true}) {
    if (simd && !kernels::cpu_has_avx2()) continue;
    uint16_t got = 0;
    int8_t m[8];
    auto run = [&](uint16_t hint) {
      return simd ? kernels::detail::factor_values8_avx2(v, &got, m, hint)
                  : kernels::detail::factor_values_scalar(v, 8, &got, m, hint);
    };
    REQUIRE(run(f32_to_f16(2 * d)));
    CHECK(got == f32_to_f16(2 * d));
    for (int i = 0; i < 8; ++i) CHECK(int(m[i]) == ms[i] / 2);
    REQUIRE(run(0));  // no hint: the last resort, from 127 down, stops at 76
    CHECK(got == f32_to_f16(d));
    for (int i = 0; i < 8; ++i) CHECK(int(m[i]) == ms[i]);
    REQUIRE(run(f32_to_f16(0.37f)));  // a hint that does not fit: the same as none
    CHECK(got == f32_to_f16(d));
  }
}

TEST_CASE("quantize_activations: per-32 absmax scale, round to nearest, half-block sums") {
  const int64_t T = 3, K = 96;
  auto x = randn(size_t(T * K), 5);
  ActBuf a(x.data(), T, K);
  int bad = 0;
  for (int64_t b = 0; b < T * K / 32; ++b) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[size_t(b * 32 + i)]));
    if (a.q.scale[b] != amax / 127.0f) ++bad;
    for (int h = 0; h < 2; ++h) {
      int s = 0;
      for (int i = h * 16; i < h * 16 + 16; ++i) {
        const int64_t j = b * 32 + i;
        s += a.q.q[j];
        if (std::abs(int(a.q.q[j])) > 127 || std::fabs(x[size_t(j)] - a.deq(0, j)) > 0.5001 * a.q.scale[b]) ++bad;
      }
      if (a.q.sum[b * 2 + h] != a.q.scale[b] * float(s) || a.q.half_sum[b * 2 + h] != s) ++bad;
    }
  }
  CHECK(bad == 0);
  // rows quantized in two parts (as the backend's threads do) give the same bytes
  std::vector<uint8_t> raw(kernels::qactivation_bytes(T, K) + 64, 0xCD);
  void* p = raw.data() + (64 - reinterpret_cast<uintptr_t>(raw.data()) % 64) % 64;
  kernels::quantize_activation_rows(x.data(), T, K, 1, T, p);
  const kernels::QActivations parts = kernels::quantize_activation_rows(x.data(), T, K, 0, 1, p);
  CHECK(std::memcmp(parts.q, a.q.q, size_t(T * K)) == 0);
  CHECK(std::memcmp(parts.scale, a.q.scale, size_t(T * K / 32) * 4) == 0);
  CHECK(std::memcmp(parts.sum, a.q.sum, size_t(T * K / 16) * 4) == 0);
  CHECK(std::memcmp(parts.half_sum, a.q.half_sum, size_t(T * K / 16) * 4) == 0);
}

TEST_CASE("quantize_activation_blocks: a decode step's rows in ranges of blocks give the rows' bytes") {
  for (int64_t T : {1, 2, 3})
    for (int64_t K : {32, 4096 + 96}) {
      CAPTURE(T);
      CAPTURE(K);
      const auto x = randn(size_t(T * K), uint32_t(60 + T));
      ActBuf whole(x.data(), T, K);
      std::vector<uint8_t> raw(kernels::qactivation_bytes(T, K) + 64, 0xCD);
      void* p = raw.data() + (64 - reinterpret_cast<uintptr_t>(raw.data()) % 64) % 64;
      const int64_t blocks = T * K / 32;
      kernels::QActivations parts{};
      // ranges of 1, 5, 16 and the rest, across row ends, the last first
      std::vector<int64_t> cuts = {0};
      for (int64_t c : {int64_t(1), int64_t(6), int64_t(22)})
        if (c < blocks) cuts.push_back(c);
      cuts.push_back(blocks);
      for (size_t i = cuts.size() - 1; i-- > 0;)
        parts = kernels::quantize_activation_blocks(x.data(), T, K, cuts[i], cuts[i + 1], p);
      CHECK(parts.t == T);
      CHECK(parts.tile_rows == 0);
      CHECK(std::memcmp(parts.q, whole.q.q, size_t(T * K)) == 0);
      CHECK(std::memcmp(parts.scale, whole.q.scale, size_t(blocks) * 4) == 0);
      CHECK(std::memcmp(parts.sum, whole.q.sum, size_t(blocks * 2) * 4) == 0);
      CHECK(std::memcmp(parts.half_sum, whole.q.half_sum, size_t(blocks * 2) * 4) == 0);
    }
  // rows with tiles are quantize_activation_rows' (and blocks past the end are refused)
  const auto x = randn(size_t(8 * 64), 70);
  std::vector<uint8_t> raw(kernels::qactivation_bytes(8, 64) + 64);
  void* p = raw.data() + (64 - reinterpret_cast<uintptr_t>(raw.data()) % 64) % 64;
  if (kernels::qlinear_isa() != std::string("scalar"))
    CHECK_THROWS(kernels::quantize_activation_blocks(x.data(), 8, 64, 0, 2, p));
  CHECK_THROWS(kernels::quantize_activation_blocks(x.data(), 1, 64, 0, 3, p));
}

TEST_CASE("quantize_activations: the prefill kernels' tiles (16 tokens on AMX, 4 on AVX-512 / AVX2) hold each "
          "token's codes, scales and sums in the documented order, whatever the split; views keep them from a tile") {
  const int64_t T = 37, K = 96, blocks = K / 32;  // two tiles of 16 and 5 tokens besides; 9 of 4 and one
  const auto x = randn(size_t(T * K), 17);
  const ActBuf a(x.data(), T, K);
  const int rows = a.q.tile_rows;
  const std::string isa = kernels::qlinear_isa();
  CHECK(rows == (kernels::qlinear_amx() ? 16 : isa == "scalar" ? 0 : 4));
  if (rows == 0) LLMCTL_SKIP("the scalar kernels read no tiles: the quantizer writes none");
  const int64_t tiles = rows == 16 ? T / 16 : (T + 3) / 4;
  int bad = 0;
  for (int64_t t = 0; t < tiles * rows; ++t) {
    const int64_t tile = t / rows, j = t % rows;
    const bool pad = t >= T;  // tiles of 4: the last one's tokens past T are zeros
    for (int64_t b = 0; b < blocks; ++b) {
      const int8_t* q = a.q.tile_q + ((tile * blocks + b) * rows + j) * 32;
      for (int i = 0; i < 32; ++i) bad += q[i] != (pad ? 0 : a.q.q[t * K + b * 32 + i]);
      bad += a.q.tile_scale[(tile * blocks + b) * rows + j] != (pad ? 0.f : a.q.scale[t * blocks + b]);
    }
    for (int64_t h = 0; h < 2 * blocks; ++h) {
      const int64_t at = (tile * 2 * blocks + h) * rows + j;
      if (rows == 16) bad += a.q.tile_sum[at] != a.q.sum[t * 2 * blocks + h];
      else bad += a.q.tile_half_sum[at] != (pad ? 0 : a.q.half_sum[t * 2 * blocks + h]);
    }
  }
  CHECK(bad == 0);
  CHECK((rows == 16 ? a.q.tile_half_sum == nullptr : a.q.tile_sum == nullptr));
  // rows quantized in three parts (as the backend's threads do, cuts inside tiles) give the same tiles
  // (the buffer sized for the int16 tiles below too)
  std::vector<uint8_t> raw(kernels::qactivation_bytes(T, K, true) + 64, 0xCD);
  void* p = raw.data() + (64 - reinterpret_cast<uintptr_t>(raw.data()) % 64) % 64;
  kernels::quantize_activation_rows(x.data(), T, K, 21, T, p);
  kernels::quantize_activation_rows(x.data(), T, K, 0, 5, p);
  const kernels::QActivations parts = kernels::quantize_activation_rows(x.data(), T, K, 5, 21, p);
  CHECK(std::memcmp(parts.tile_q, a.q.tile_q, size_t(tiles * rows * K)) == 0);
  CHECK(std::memcmp(parts.tile_scale, a.q.tile_scale, size_t(tiles * rows * blocks) * 4) == 0);
  if (rows == 16) CHECK(std::memcmp(parts.tile_sum, a.q.tile_sum, size_t(tiles * rows * 2 * blocks) * 4) == 0);
  else CHECK(std::memcmp(parts.tile_half_sum, a.q.tile_half_sum, size_t(tiles * rows * 2 * blocks) * 4) == 0);
  // views: from a tile's first token (and, tiles of 4, to x's end or a tile's end) they keep x's tiles
  const kernels::QActivations from16 = kernels::qactivation_rows(a.q, 16, T);
  const kernels::QActivations from5 = kernels::qactivation_rows(a.q, 5, T);
  CHECK(from16.tile_rows == rows);
  CHECK(from16.tile_q == a.q.tile_q + 16 * K);
  CHECK(from16.tile_scale == a.q.tile_scale + 16 * blocks);
  CHECK(from5.tile_rows == 0);
  CHECK(from5.tile_q == nullptr);
  if (rows == 4) {
    CHECK(kernels::qactivation_rows(a.q, 8, 16).tile_rows == 4);
    CHECK(kernels::qactivation_rows(a.q, 8, 18).tile_rows == 0);  // its last tile would hold x's 19th token
  }
  // widened (asked for): the codes as int16, each quad's middle two swapped, and -128 x a block's sum
  CHECK(a.q.tile_q16 == nullptr);
  const kernels::QActivations wide = kernels::quantize_activation_rows(x.data(), T, K, 0, T, p, true);
  if (rows == 16) {
    CHECK(wide.tile_q16 == nullptr);  // AMX's tiles take none
    return;
  }
  REQUIRE(wide.tile_q16 != nullptr);
  bad = 0;
  for (int64_t t = 0; t < tiles * 4; ++t)
    for (int64_t b = 0; b < blocks; ++b) {
      const int16_t* a16 = wide.tile_q16 + ((t / 4 * blocks + b) * 4 + t % 4) * 32;
      const int order[4] = {0, 2, 1, 3};
      int sum = 0;
      for (int i = 0; i < 32; ++i) {
        const int code = t < T ? a.q.q[t * K + b * 32 + i / 4 * 4 + order[i % 4]] : 0;
        bad += a16[i] != code;
        sum += code;
      }
      bad += wide.tile_wc[(t / 4 * blocks + b) * 4 + t % 4] != -128 * sum;
    }
  CHECK(bad == 0);
  CHECK(kernels::qactivation_rows(wide, 4, T).tile_q16 == wide.tile_q16 + 4 * K);
}

TEST_CASE("qlinear_widens_activations: the AVX2 tiles without VNNI over wide codebooks and wide 8-bit codes") {
  const QW eight = make_qw(8, 32, 32, 64, ScaleType::F16, 3).as(kernels::QLayout::RowLane16),
           four = make_qw(4, 32, 32, 64, ScaleType::F16, 4).as(kernels::QLayout::RowLane16),
           eight16 = make_qw(8, 16, 32, 64, ScaleType::F16, 5).as(kernels::QLayout::RowLane16);
  const kernels::QWeightView v8 = eight.view(), v4 = four.view(), v8g16 = eight16.view();
  kernels::QWeightView book = v4;
  const int8_t values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  book.codebook = values;
  kernels::QWeightView grid = v4;  // IQ2's values spanning 86: narrow codes instead (codebook_narrow_step)
  const int8_t grid_values[16] = {-43, -25, -8, 8, 25, 43, 43, 43, 43, 43, 43, 43, 43, 43, 43, 43};
  grid.codebook = grid_values;
  const bool avx2 = std::string(kernels::qlinear_isa()) == "avx2";
  CHECK(kernels::qlinear_widens_activations(v8) == avx2);
  CHECK(kernels::qlinear_widens_activations(book) == avx2);
  CHECK_FALSE(kernels::qlinear_widens_activations(grid));
  CHECK_FALSE(kernels::qlinear_widens_activations(v4));
  CHECK_FALSE(kernels::qlinear_widens_activations(v8g16));  // groups of 16: two groups a unit
}

TEST_CASE("the activation quantizer's AVX2 variant gives the scalar variant's bytes") {
  namespace detail = kernels::detail;
  if (!kernels::cpu_has_avx2()) LLMCTL_SKIP("this CPU has no AVX2/FMA/F16C");
  const int64_t blocks = 200;
  auto x = randn(size_t(blocks * 32), 91);
  for (int i = 0; i < 32; ++i) x[size_t(5 * 32 + i)] = 0.0f;                        // amax 0: all codes 0
  for (int i = 0; i < 32; ++i) x[size_t(6 * 32 + i)] = float(i - 16) * 0.5f;          // exact halves: ties to even
  for (int64_t b = 7; b < blocks; ++b)                                                 // magnitudes 2^-20 .. 2^20
    for (int i = 0; i < 32; ++i) x[size_t(b * 32 + i)] *= std::ldexp(1.0f, int(b % 41) - 20);
  struct Out {
    std::vector<int8_t> q = std::vector<int8_t>(size_t(blocks * 32));
    std::vector<float> scale = std::vector<float>(size_t(blocks)), sum = std::vector<float>(size_t(2 * blocks));
    std::vector<int32_t> half = std::vector<int32_t>(size_t(2 * blocks));
  } s, v;
  detail::quantize_act_blocks_scalar(x.data(), 0, blocks, s.q.data(), s.scale.data(), s.sum.data(), s.half.data());
  detail::quantize_act_blocks_avx2(x.data(), 0, blocks, v.q.data(), v.scale.data(), v.sum.data(), v.half.data());
  CHECK(s.half == v.half);
  CHECK(std::memcmp(s.q.data(), v.q.data(), s.q.size()) == 0);
  CHECK(std::memcmp(s.scale.data(), v.scale.data(), s.scale.size() * 4) == 0);
  CHECK(std::memcmp(s.sum.data(), v.sum.data(), s.sum.size() * 4) == 0);
  int nonzero = 0;  // not a trivially equal pair of zero buffers
  for (int8_t c : v.q) nonzero += c != 0;
  CHECK(nonzero > blocks * 20);
}

TEST_CASE("Rows layout without offsets (every one -0: Q8_0, Q6_K): the bits of stored -0 offsets, and not kept") {
  for (int bits : {4, 8})
    for (int group : {16, 32})
      for (ScaleType st : {ScaleType::F16, ScaleType::F32}) {
        const int64_t N = 21, K = 96, T = 3;
        QW q = make_qw(bits, group, N, K, st, uint32_t(90 + bits + group));
        for (size_t i = 0; i < q.scale_f32.size(); ++i) {
          q.offset_f32[i] = -0.0f;
          if (st == ScaleType::F16) q.offset_f16[i] = 0x8000;  // -0 in f16
        }
        REQUIRE(kernels::qweight_implied_zero(bits, N, K, group, st, q.scales(), q.offsets()) == 0);
        const QW rows = q.as(kernels::QLayout::Rows);
        kernels::QWeightView none = rows.view();
        none.offset = nullptr;
        const auto x = randn(size_t(T * K), 91), bias = randn(size_t(N), 92);
        const ActBuf a(x.data(), T, K);
        for (const Variant& v : variants()) {
          std::vector<float> o1(size_t(T * N)), o2(size_t(T * N)), f1(size_t(T * N)), f2(size_t(T * N));
          v.q8(a.q, rows.view(), bias.data(), 0, N, o1.data(), N);
          v.q8(a.q, none, bias.data(), 0, N, o2.data(), N);
          v.f32(x.data(), T, rows.view(), bias.data(), 0, N, f1.data(), N);
          v.f32(x.data(), T, none, bias.data(), 0, N, f2.data(), N);
          INFO(v.name << " bits " << bits << " group " << group << (st == ScaleType::F16 ? " f16" : " f32"));
          CHECK(same_bits(o1, o2));
          CHECK(same_bits(f1, f2));
        }
        std::vector<float> d1(static_cast<size_t>(K)), d2(static_cast<size_t>(K));
        kernels::qweight_dequantize_row(rows.view(), 5, d1.data());
        kernels::qweight_dequantize_row(none, 5, d2.data());
        CHECK(same_bits(d1, d2));
      }
  // the CPU backend keeps no offsets for such a weight (groups of 16: row-lane on a SIMD CPU, else Rows)
  auto be = make_cpu_backend(1);
  const bool rows16 = kernels::qweight_preferred_layout(8, 16) == kernels::QLayout::Rows;
  QW q = make_qw(8, 16, 8, 64, ScaleType::F32, 93);
  LinearWeight c;
  c.format = WeightFormat::Int8Group, c.n = 8, c.k = 64, c.group_size = 16;
  c.data = Tensor::empty_host(DType::U8, {8, 64});
  std::memcpy(c.data.data, q.codes.data(), q.codes.size());
  c.scales = Tensor::empty_host(DType::F32, {8, 4});
  std::memcpy(c.scales.data, q.scale_f32.data(), c.scales.nbytes());
  c.zeros = Tensor::empty_host(DType::F32, {8, 4});
  for (int64_t i = 0; i < 32; ++i) c.zeros.ptr<float>()[i] = -0.0f;
  const LinearWeight none_kept = be->upload_quantized(c);
  CHECK((rows16 ? none_kept.zeros.empty() : cpu_qweight_view(none_kept).implied_zero == 0));
  c.zeros.ptr<float>()[3] = 0.0f;  // +0 is an offset: kept
  const LinearWeight kept = be->upload_quantized(c);
  CHECK((rows16 ? !kept.zeros.empty() : cpu_qweight_view(kept).implied_zero == -1));
}

TEST_CASE("qlinear variants match a double reference, batch-invariantly, over a table of shapes") {
  const auto vs = variants();
  const int64_t Ns[] = {1, 2, 7, 16, 33, 67, 4, 31};
  int case_no = 0, cases = 0;
  for (int64_t K : {32, 96, 576, 1536})
    for (int group : {16, 32, 64, 128, int(K)})
      for (int bits : {2, 4, 8})
        for (ScaleType st : {ScaleType::F32, ScaleType::F16}) {
          if (K % group || (group == int(K) && K == 32)) continue;  // group = K = 32: already in the list
          if (bits == 2 && (group % 32 != 0 && group != 16)) continue;  // 2 bits: the row-lane layout only
          for (int64_t T : {1, 2, 3, 5, 17}) {
            const int64_t N = Ns[case_no++ % 8];
            const QW q = make_qw(bits, group, N, K, st, uint32_t(case_no));
            const auto x = randn(size_t(T * K), uint32_t(1000 + case_no)), bias = randn(size_t(N), uint32_t(7 + case_no));
            const ActBuf a(x.data(), T, K);
            // references: on the f32 activations, and on the dequantized int8 ones
            std::vector<double> ref(size_t(T * N)), refq(size_t(T * N)), mag(size_t(T * N)), qerr(size_t(T * N));
            for (int64_t t = 0; t < T; ++t)
              for (int64_t n = 0; n < N; ++n) {
                double s = bias[size_t(n)], sq = bias[size_t(n)], m = std::fabs(bias[size_t(n)]), e = 0;
                for (int64_t k = 0; k < K; ++k) {
                  const double w = q.w(n, k), xv = x[size_t(t * K + k)];
                  s += xv * w, sq += a.deq(t, k) * w, m += std::fabs(xv * w);
                  e += std::fabs(w) * 0.5001 * a.q.scale[(t * K + k) / 32];  // |x - deq(x)| <= scale / 2
                }
                ref[size_t(t * N + n)] = s, refq[size_t(t * N + n)] = sq, mag[size_t(t * N + n)] = m, qerr[size_t(t * N + n)] = e;
              }
            std::vector<kernels::QLayout> layouts;
            if (bits != 2) layouts.push_back(kernels::QLayout::Rows);
            if (group % 32 == 0 || group == 16) layouts.push_back(kernels::QLayout::RowLane16);
            for (kernels::QLayout layout : layouts) {
            const QW ql = q.as(layout);
            const auto view = ql.view();
            const std::string what = "K " + std::to_string(K) + " N " + std::to_string(N) + " T " + std::to_string(T) +
                                     " bits " + std::to_string(bits) + " group " + std::to_string(group) +
                                     (st == ScaleType::F16 ? " f16" : " f32") +
                                     (layout == kernels::QLayout::Rows ? " rows" : " rowlane16");
            for (const Variant& v : vs)
              for (ActQuant mode : {ActQuant::None, ActQuant::Int8}) {
                if (group == 16 && layout == kernels::QLayout::RowLane16 && std::string(v.name) == "avx512") continue;
                const bool i8 = mode == ActQuant::Int8;
                auto run = [&](int64_t t0, int64_t t1, int64_t n0, int64_t n1, std::vector<float>& out) {
                  if (!i8) return v.f32(x.data() + t0 * K, t1 - t0, view, bias.data(), n0, n1, out.data() + t0 * N, N);
                  kernels::QActivations rows = a.q;  // a token range of the same activations
                  rows.t = t1 - t0, rows.q += t0 * K, rows.scale += t0 * K / 32, rows.sum += t0 * K / 16,
                  rows.half_sum += t0 * K / 16;
                  v.q8(rows, view, bias.data(), n0, n1, out.data() + t0 * N, N);
                };
                std::vector<float> out(size_t(T * N), NAN), alone(size_t(T * N), NAN), split(size_t(T * N), NAN);
                run(0, T, 0, N, out);
                for (int64_t t = 0; t < T; ++t) run(t, t + 1, 0, N, alone);
                const int64_t cut = (N / 2) | 1;
                run(0, T, 0, std::min(cut, N), split);
                if (cut < N) run(0, T, cut, N, split);
                int bad = 0, bad_q = 0;
                for (size_t i = 0; i < out.size(); ++i) {
                  const double want = i8 ? refq[i] : ref[i];
                  if (!(std::fabs(out[i] - want) <= 1e-5 * mag[i] + 1e-6)) ++bad;
                  if (i8 && !(std::fabs(out[i] - ref[i]) <= qerr[i] + 1e-5 * mag[i] + 1e-6)) ++bad_q;
                }
                INFO(v.name << (i8 ? " int8 " : " f32 ") << what);
                CHECK(bad == 0);
                CHECK(bad_q == 0);
                CHECK(same_bits(out, alone));
                CHECK(same_bits(out, split));
              }
            }
            ++cases;
          }
        }
  MESSAGE(cases << " shapes (groups of 16 and 32k in both layouts; AVX-512: row-lane for 32k only) x " << vs.size() << " variants x 2 activation modes");
  CHECK(cases == 390);  // the table above, all of it
}

TEST_CASE("int8 activations: the error against f32 activations is small") {
  // K = 1536, int4 group 32, as a down projection: relative RMS error of the outputs.
  const int64_t K = 1536, N = 64, T = 8;
  const QW q = make_qw(4, 32, N, K, ScaleType::F16, 99);
  const auto x = randn(size_t(T * K), 100);
  const ActBuf a(x.data(), T, K);
  std::vector<float> of(size_t(T * N)), oq(size_t(T * N));
  kernels::qlinear_rows_f32(x.data(), T, q.view(), nullptr, 0, N, of.data(), N);
  kernels::qlinear_rows_q8(a.q, q.view(), nullptr, 0, N, oq.data(), N);
  double num = 0, den = 0;
  for (size_t i = 0; i < of.size(); ++i) num += (oq[i] - of[i]) * double(oq[i] - of[i]), den += double(of[i]) * of[i];
  const double rel = std::sqrt(num / den);
  MESSAGE("int8-activation relative RMS error: " << rel);
  CHECK(rel < 0.02);
  CHECK(rel > 0);  // the mode does quantize
}

TEST_CASE("qlinear dispatch runs the variant qlinear_isa names") {
  const std::string isa = kernels::qlinear_isa();
  const QW q = make_qw(4, 32, 9, 96, ScaleType::F32, 3);
  const auto x = randn(96 * 2, 4);
  const ActBuf a(x.data(), 2, 96);
  std::vector<float> o(18), r(18);
  kernels::qlinear_rows_q8(a.q, q.view(), nullptr, 0, 9, o.data(), 9);
  if (isa == "avx512-vnni")
    kernels::detail::qlinear_rows_q8_avx512(a.q, q.view(), nullptr, 0, 9, r.data(), 9);
  else if (isa == "avx2" || isa == "avx-vnni")  // (avx-vnni: Rows weights run AVX2's kernel)
    kernels::detail::qlinear_rows_q8_avx2(a.q, q.view(), nullptr, 0, 9, r.data(), 9);
  else
    kernels::detail::qlinear_rows_q8_scalar(a.q, q.view(), nullptr, 0, 9, r.data(), 9);
  CHECK(same_bits(o, r));
}

TEST_CASE("CpuBackend: Backend::linear runs Int4Group / Int8Group weights, split over threads") {
  const int64_t T = 5, K = 192, N = 37;
  const auto x = randn(size_t(T * K), 21), bias = randn(size_t(N), 22);
  Tensor xt = Tensor::empty_host(DType::F32, {T, K}), bt = Tensor::empty_host(DType::F32, {N});
  std::memcpy(xt.data, x.data(), x.size() * 4);
  std::memcpy(bt.data, bias.data(), bias.size() * 4);
  for (int bits : {4, 8})
    for (ScaleType st : {ScaleType::F32, ScaleType::F16}) {
      const QW q = make_qw(bits, 64, N, K, st, uint32_t(30 + bits));
      // by hand: packed codes, scales and offsets as the backend keeps them
      LinearWeight w;
      w.format = bits == 4 ? WeightFormat::Int4Group : WeightFormat::Int8Group;
      w.n = N, w.k = K, w.group_size = 64;
      if (kernels::qweight_preferred_layout(bits, 64) == kernels::QLayout::RowLane16) {  // AVX-512 CPUs
        REQUIRE(kernels::qweight_implied_zero(bits, N, K, 64, st, q.scales(), q.offsets()) == -1);  // random offsets
        const int64_t blocks = (N + 15) / 16, bb = kernels::qweight_rowlane_block_bytes(bits, K, 64, st);
        w.data = Tensor::zeros_host(DType::U8, {blocks + 1, bb});
        kernels::qweight_pack_rowlane(bits, N, K, 64, st, q.codes.data(), q.scales(), q.offsets(), w.data.ptr<uint8_t>());
        const int32_t zero = -1, f16 = st == ScaleType::F16;  // + the descriptor: "RL16", zero -1, scale type
        std::memcpy(w.data.ptr<uint8_t>() + blocks * bb, "RL16", 4);
        std::memcpy(w.data.ptr<uint8_t>() + blocks * bb + 4, &zero, 4);
        std::memcpy(w.data.ptr<uint8_t>() + blocks * bb + 8, &f16, 4);
      } else {
        w.data = Tensor::empty_host(DType::U8, {N, kernels::qweight_row_bytes(bits, K)});
        kernels::qweight_pack(bits, N, K, q.codes.data(), w.data.ptr<uint8_t>());
      }
      const DType sd = st == ScaleType::F16 ? DType::F16 : DType::F32;
      w.scales = Tensor::empty_host(sd, {N, K / 64});
      w.zeros = Tensor::empty_host(sd, {N, K / 64});
      const size_t sb = size_t(N * (K / 64)) * dtype_size(sd);
      std::memcpy(w.scales.data, st == ScaleType::F16 ? static_cast<const void*>(q.scale_f16.data()) : q.scale_f32.data(), sb);
      std::memcpy(w.zeros.data, st == ScaleType::F16 ? static_cast<const void*>(q.offset_f16.data()) : q.offset_f32.data(), sb);
      // the canonical form through upload_quantized packs to the same bytes
      LinearWeight canon = w;
      canon.data = Tensor::empty_host(DType::U8, {N, K});
      std::memcpy(canon.data.data, q.codes.data(), q.codes.size());
      for (ActQuantMode mode : {ActQuantMode::None, ActQuantMode::Int8}) {
        auto one = make_cpu_backend(1, mode), two = make_cpu_backend(2, mode);
        REQUIRE(one->caps().supports(w.format));
        const LinearWeight up = two->upload_quantized(canon);
        REQUIRE(up.data.nbytes() == w.data.nbytes());
        CHECK(std::memcmp(up.data.data, w.data.data, w.data.nbytes()) == 0);
        Tensor o1 = Tensor::empty_host(DType::F32, {T, N}), o2 = Tensor::empty_host(DType::F32, {T, N});
        one->linear(xt, w, &bt, o1);
        two->linear(xt, up, &bt, o2);
        CHECK(std::memcmp(o1.data, o2.data, o1.nbytes()) == 0);  // thread count changes no bit
        for (int64_t t = 0; t < T; ++t) {  // each token alone gives its row of the batch, bit for bit
          Tensor xr = Tensor::empty_host(DType::F32, {1, K}), orow = Tensor::empty_host(DType::F32, {1, N});
          std::memcpy(xr.data, x.data() + t * K, size_t(K) * 4);
          two->linear(xr, up, &bt, orow);
          CHECK(std::memcmp(orow.data, o2.ptr<float>() + t * N, size_t(N) * 4) == 0);
        }
        int bad = 0;
        for (int64_t t = 0; t < T; ++t)
          for (int64_t n = 0; n < N; ++n) {
            double ref = bias[size_t(n)], mag = std::fabs(bias[size_t(n)]);
            for (int64_t k = 0; k < K; ++k) ref += x[size_t(t * K + k)] * q.w(n, k), mag += std::fabs(x[size_t(t * K + k)] * q.w(n, k));
            // none: exact up to summation order; int8: the activations' rounding (a loose bound)
            const double tol = mode == ActQuantMode::None ? 1e-5 * mag + 1e-6 : 0.02 * mag;
            if (!(std::fabs(o1.ptr<float>()[t * N + n] - ref) <= tol)) ++bad;
          }
        INFO("bits " << bits << " act-quant " << act_quant_name(mode));
        CHECK(bad == 0);
        CHECK(std::string(one->name()).find(std::string("act-quant ") + act_quant_name(mode)) != std::string::npos);
      }
    }
  // a canonical 4-bit code above 15 is refused, as is a dense backend call on an unpacked weight
  auto be = make_cpu_backend(1);
  LinearWeight bad;
  bad.format = WeightFormat::Int4Group, bad.n = 1, bad.k = 32, bad.group_size = 32;
  bad.data = Tensor::zeros_host(DType::U8, {1, 32});
  bad.scales = Tensor::zeros_host(DType::F32, {1, 1});
  bad.zeros = Tensor::zeros_host(DType::F32, {1, 1});
  bad.data.ptr<uint8_t>()[3] = 16;
  CHECK_THROWS(be->upload_quantized(bad));
  Tensor x1 = Tensor::zeros_host(DType::F32, {1, 32}), o1 = Tensor::zeros_host(DType::F32, {1, 1});
  CHECK_THROWS(be->linear(x1, bad, nullptr, o1));  // [1, 32] bytes is not the packed [1, 16]
}

TEST_CASE("qweight_dequantize_row: each layout's row is scale * code + offset (product rounded first)") {
  for (int bits : {4, 8})
    for (ScaleType st : {ScaleType::F16, ScaleType::F32})
      for (int group : {16, 32, 64})
        for (int z : {-1, 0, 8}) {  // implied zero points: RowLane16 only, 8 with 4 bits only
          if (z == 8 && bits == 8) continue;
          const int64_t N = 37, K = 192;
          QW q = make_qw(bits, group, N, K, st, uint32_t(400 + bits + group + z));
          if (z >= 0)
            for (size_t i = 0; i < q.scale_f32.size(); ++i) {
              q.offset_f32[i] = kernels::detail::implied_offset(z, q.scale_f32[i]);
              if (st == ScaleType::F16) q.offset_f16[i] = f32_to_f16(q.offset_f32[i]);
            }
          std::vector<kernels::QLayout> layouts;
          if (z < 0) layouts.push_back(kernels::QLayout::Rows);
          if (group % 32 == 0) layouts.push_back(kernels::QLayout::RowLane16);
          for (kernels::QLayout l : layouts) {
            const QW p = q.as(l, l == kernels::QLayout::RowLane16 ? z : -1);
            int bad = 0;
            std::vector<float> row(static_cast<size_t>(K));
            for (int64_t n : {int64_t(0), int64_t(15), int64_t(16), int64_t(21), N - 1}) {
              kernels::qweight_dequantize_row(p.view(), n, row.data());
              for (int64_t k = 0; k < K; ++k) {
                const int code = bits == 4 ? int(q.codes[size_t(n * K + k)]) : int(int8_t(q.codes[size_t(n * K + k)]));
                const int64_t g = n * (K / group) + k / group;
                const float prod = q.scale_f32[size_t(g)] * float(code);
                const float want = prod + q.offset_f32[size_t(g)];
                bad += std::memcmp(&want, &row[size_t(k)], 4) != 0;
              }
            }
            INFO("bits " << bits << " group " << group << " z " << z << (st == ScaleType::F16 ? " f16" : " f32")
                         << (l == kernels::QLayout::Rows ? " rows" : " row-lane"));
            CHECK(bad == 0);
          }
        }
  const QW q = make_qw(4, 32, 5, 64, ScaleType::F32, 1);
  std::vector<float> row(64);
  CHECK_THROWS(kernels::qweight_dequantize_row(q.view(), 5, row.data()));  // past the last row
}

namespace {
// q (4-bit codes, groups of 32, F16 scales) as the canonical Int4Group weight upload_quantized takes.
LinearWeight int4_g32_canonical(const QW& q) {
  LinearWeight c;
  c.format = WeightFormat::Int4Group, c.n = q.n, c.k = q.k, c.group_size = 32;
  c.data = Tensor::empty_host(DType::U8, {q.n, q.k});
  std::memcpy(c.data.data, q.codes.data(), q.codes.size());
  c.scales = Tensor::empty_host(DType::F16, {q.n, q.k / 32});
  c.zeros = Tensor::empty_host(DType::F16, {q.n, q.k / 32});
  std::memcpy(c.scales.data, q.scale_f16.data(), c.scales.nbytes());
  std::memcpy(c.zeros.data, q.offset_f16.data(), c.zeros.nbytes());
  return c;
}
}  // namespace

TEST_CASE("CpuBackend: an embedding lookup into a quantized table equals the lookup into its dequantized table") {
  const int64_t V = 53, H = 128;
  const QW q = make_qw(4, 32, V, H, ScaleType::F16, 77);
  const LinearWeight canon = int4_g32_canonical(q);
  // act-order: packed column j holds original column perm[j]
  std::vector<int32_t> perm(static_cast<size_t>(H));
  for (int64_t j = 0; j < H; ++j) perm[size_t(j)] = int32_t((j * 37) % H);
  auto be = make_cpu_backend(2);
  REQUIRE(be->caps().quantized_embed);
  for (bool permuted : {false, true}) {
    LinearWeight c = canon;
    if (permuted) {
      c.input_perm = Tensor::empty_host(DType::I32, {H});
      std::memcpy(c.input_perm.data, perm.data(), perm.size() * 4);
    }
    const LinearWeight packed = be->upload_quantized(c);
    // the dense table: row r, original column perm[j] (or j) = scale * code[r, j] + offset
    Tensor table = Tensor::empty_host(DType::F32, {V, H});
    for (int64_t r = 0; r < V; ++r)
      for (int64_t j = 0; j < H; ++j) {
        const int64_t g = r * (H / 32) + j / 32;
        const float prod = q.scale_f32[size_t(g)] * float(q.codes[size_t(r * H + j)]);
        table.ptr<float>()[r * H + (permuted ? perm[size_t(j)] : j)] = prod + q.offset_f32[size_t(g)];
      }
    BatchPlan plan;
    plan.token_ids = {0, 52, 17, 17, 30, 3, 60, 45};  // repeats; ids past a rank's 53 rows give zero rows
    const DeviceBatch b = be->prepare_batch(plan);
    for (int64_t vocab_begin : {int64_t(0), int64_t(10)}) {  // a vocab-parallel rank's rows start at 10
      const int64_t T = int64_t(plan.token_ids.size());
      Tensor o1 = Tensor::empty_host(DType::F32, {T, H}), o2 = Tensor::empty_host(DType::F32, {T, H});
      be->embed(packed, b, o1, vocab_begin);
      be->embed(table, b, o2, vocab_begin);
      INFO("act-order " << permuted << " vocab_begin " << vocab_begin);
      CHECK(std::memcmp(o1.data, o2.data, o1.nbytes()) == 0);
    }
  }
}

TEST_CASE("cpu linear_group: every item's output is linear()'s, bit for bit (dense, quantized, act-order)") {
  const int64_t K = 64, N = 48;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  auto quantized = [&](uint32_t seed, bool permuted) {
    LinearWeight c = int4_g32_canonical(make_qw(4, 32, N, K, ScaleType::F16, seed));
    if (permuted) {
      c.input_perm = Tensor::empty_host(DType::I32, {K});
      for (int64_t j = 0; j < K; ++j) c.input_perm.ptr<int32_t>()[j] = int32_t((j * 37) % K);
    }
    return c;
  };
  auto dense = [&] {
    LinearWeight w;
    w.n = N, w.k = K;
    w.data = Tensor::empty_host(DType::F32, {N, K});
    for (int64_t i = 0; i < N * K; ++i) w.data.ptr<float>()[i] = u(rng);
    return w;
  };
  for (ActQuantMode mode : {ActQuantMode::Int8, ActQuantMode::None}) {
    auto be = make_cpu_backend(2, mode);
    const std::vector<LinearWeight> w = {be->upload_quantized(quantized(1, false)), dense(),
                                         be->upload_quantized(quantized(2, true)), be->upload_quantized(quantized(3, false)),
                                         dense()};
    const std::vector<int64_t> rows = {1, 3, 17, 0, 2};
    std::vector<Tensor> x, grouped, alone;
    std::vector<Backend::GroupedLinear> items;
    for (size_t i = 0; i < w.size(); ++i) {
      x.push_back(Tensor::empty_host(DType::F32, {rows[i], K}));
      for (int64_t j = 0; j < rows[i] * K; ++j) x[i].ptr<float>()[j] = u(rng);
      grouped.push_back(Tensor::empty_host(DType::F32, {rows[i], N}));
      alone.push_back(Tensor::empty_host(DType::F32, {rows[i], N}));
    }
    for (size_t i = 0; i < w.size(); ++i) {
      items.push_back({x[i], &w[i], grouped[i]});
      be->linear(x[i], w[i], nullptr, alone[i]);
    }
    be->linear_group(items);
    for (size_t i = 0; i < w.size(); ++i) {
      INFO("item " << i << ", act-quant " << act_quant_name(mode));
      CHECK(std::memcmp(grouped[i].data, alone[i].data, alone[i].nbytes()) == 0);
    }
  }
}

TEST_CASE("cpu linear, a prompt split over tokens where rows are few for the threads: the same bits as one thread") {
  // 16 threads over 3 chunks of 16 rows: the tokens go in ranges of 8 (cpu_backend.cpp: token_split)
  const int64_t K = 64, N = 48;
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const LinearWeight canonical = int4_g32_canonical(make_qw(4, 32, N, K, ScaleType::F16, 21));
  for (ActQuantMode mode : {ActQuantMode::Int8, ActQuantMode::None})
    for (int64_t T : {0, 1, 9, 41, 64}) {
      Tensor x = Tensor::empty_host(DType::F32, {T, K});
      for (int64_t j = 0; j < T * K; ++j) x.ptr<float>()[j] = u(rng);
      auto run = [&](int threads) {
        auto be = make_cpu_backend(threads, mode);
        const LinearWeight w = be->upload_quantized(canonical);
        Tensor out = Tensor::empty_host(DType::F32, {T, N});
        be->linear(x, w, nullptr, out);
        return out;
      };
      const Tensor one = run(1), three = run(3), many = run(16);
      INFO("T " << T << ", act-quant " << act_quant_name(mode));
      CHECK(std::memcmp(one.data, three.data, one.nbytes()) == 0);
      CHECK(std::memcmp(one.data, many.data, one.nbytes()) == 0);
      auto be = make_cpu_backend(1, mode);  // each token alone
      const LinearWeight w = be->upload_quantized(canonical);
      for (int64_t t = 0; t < T; ++t) {
        Tensor xt = Tensor::view(x.ptr<float>() + t * K, DType::F32, {1, K}, x.owner);
        Tensor ot = Tensor::empty_host(DType::F32, {1, N});
        be->linear(xt, w, nullptr, ot);
        CHECK(std::memcmp(ot.data, one.ptr<float>() + t * N, N * sizeof(float)) == 0);
      }
    }
}

TEST_CASE("cpu decode step, wide rows: activations quantized and gated in pieces, the same bits on any threads") {
  // K 4,096 + 64 (130 blocks): a decode step's rows quantized by the threads together; gated
  // activations 2,048 + 5 wide, split in columns where rows are fewer than threads (cpu_backend.cpp)
  const int64_t K = 4096 + 64, N = 40, I = 2048 + 5;
  std::mt19937 rng(10);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  const LinearWeight canonical = int4_g32_canonical(make_qw(4, 32, N, K, ScaleType::F16, 23));
  for (int64_t T : {1, 2, 3, 5}) {
    Tensor x = Tensor::empty_host(DType::F32, {T, K}), gate_up = Tensor::empty_host(DType::F32, {T, 2 * I});
    for (int64_t j = 0; j < T * K; ++j) x.ptr<float>()[j] = u(rng);
    for (int64_t j = 0; j < T * 2 * I; ++j) gate_up.ptr<float>()[j] = u(rng) * 4;
    auto run = [&](int threads, bool modelled) {
      auto be = make_cpu_backend(threads, ActQuantMode::Int8, std::nullopt, modelled);
      CHECK(be->thread_model_account().has_value() == modelled);
      const LinearWeight w = be->upload_quantized(canonical);
      std::vector<Tensor> out = {Tensor::empty_host(DType::F32, {T, N}), Tensor::empty_host(DType::F32, {T, I}),
                                 Tensor::empty_host(DType::F32, {T, I})};
      be->linear(x, w, nullptr, out[0]);
      be->silu_mul(gate_up, out[1]);
      be->gelu_tanh_mul(gate_up, out[2]);
      if (modelled) CHECK(be->thread_model_account()->loops >= 3);
      return out;
    };
    const auto one = run(1, false), two = run(2, false), many = run(16, true);
    for (size_t i = 0; i < one.size(); ++i) {
      INFO("T " << T << ", output " << i);
      CHECK(std::memcmp(one[i].data, two[i].data, one[i].nbytes()) == 0);
      CHECK(std::memcmp(one[i].data, many[i].data, one[i].nbytes()) == 0);
    }
  }
}

TEST_CASE("CpuBackend packing: K-quant f32 scales are kept factored where the kernels take them, same outputs") {
  for (int bits : {4, 8})
    for (int group : {16, 32})
      for (int z : {-1, 0}) {
        const int64_t N = 40, K = 512, G = K / group;
        QW q = make_qw(bits, group, N, K, ScaleType::F32, uint32_t(300 + bits + group + z));
        kquant_params(q, z, uint32_t(31 + group));
        const LinearWeight c = canonical_weight(q);
        LinearWeight odd = c;  // the last row's first scale an ulp off: no factors, f32 kept
        odd.scales = Tensor::empty_host(DType::F32, {N, G});
        std::memcpy(odd.scales.data, q.scale_f32.data(), odd.scales.nbytes());
        odd.scales.ptr<float>()[(N - 1) * G] = std::nextafter(odd.scales.ptr<float>()[(N - 1) * G], 1.0f);
        const LinearWeight pf = pack_cpu_quantized(c), po = pack_cpu_quantized(odd);
        const kernels::QWeightView vf = cpu_qweight_view(pf), vo = cpu_qweight_view(po);
        INFO("bits " << bits << " group " << group << " z " << z << " layout " << int(vf.layout));
        CHECK(vo.scale_type == ScaleType::F32);
        CHECK(vf.scale_type == (kernels::qweight_factored_ok(vf.layout) ? ScaleType::Factored : ScaleType::F32));
        const auto bytes = [](const LinearWeight& w) { return w.data.nbytes() + w.scales.nbytes() + w.zeros.nbytes(); };
        if (vf.scale_type == ScaleType::Factored) CHECK(bytes(pf) < bytes(po));
        const OutputsButLast o = outputs_but_last_row(vf, vo, 3, 17);
        CHECK(same_bits(o.q8_a, o.q8_b));
        CHECK(same_bits(o.f32_a, o.f32_b));
      }
}
