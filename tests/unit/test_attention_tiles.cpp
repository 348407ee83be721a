// Tiles of four query tokens (kernels/cpu/attention.h: paged_attention_tiles) against single-query
// calls, bit for bit, on whichever SIMD kernels run here (ctest runs it natively and stepped down to
// AVX2): up to 8 tiles a call over random f32, int8 and fp8 caches in scattered blocks, tiles whose
// shared keys end in different blocks, in any order, the same tokens twice; soft-capped scores over
// each cache.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/attention.h"
#include "tests/unit/attention_test_util.h"
#include "tests/unit/skip.h"

using namespace llmctl;
using test::QuantizedKv;
using test::randn;

TEST_CASE("paged attention of several tiles of four query tokens equals single calls, bit for bit") {
  if (!kernels::paged_attention_split_runs(64)) LLMCTL_SKIP("this CPU has no AVX2 (no tile kernel runs)");
  const int64_t B = 16, Hkv = 2, NB = 12;
  const std::vector<int32_t> table = {7, 2, 11, 0, 5, 9, 3, 1, 4, 10, 6};
  // each tile's first position: tiles sharing keys to different ends (blocks of 32 keys at head_dim
  // 128, 64 at 64), in any order, the same tokens twice (a GQA group's heads), one key only
  const std::vector<std::vector<int32_t>> tile_starts = {
      {40, 41}, {0, 90, 37}, {100, 100, 3, 64, 160, 31, 120, 77}, {171, 0, 5, 6, 128, 129, 130, 15}};
  int checked = 0;
  for (int run = 0; run < 6; ++run)  // f32, int8, fp8; each again with soft-capped scores (Gemma 2)
    for (int64_t D : {16, 32, 64, 80, 96, 128, 256})
      for (const auto& starts : tile_starts) {
        const int kind = run % 3;
        const float softcap = run >= 3 ? 3.0f : 0.0f;  // caps nearly every score of these queries
        const kernels::KvQuant quant_kind = kind == 1 ? kernels::KvQuant::Int8 : kernels::KvQuant::Fp8;
        if (!kernels::paged_attention_split_runs(D) ||
            (kind > 0 && !kernels::paged_attention_quant_in_place(quant_kind, D)))
          continue;  // no SIMD kernel for this head size or cache here (the caller runs single queries)
        const int tiles = int(starts.size()), queries = 4 * tiles;
        std::vector<int32_t> pos;
        for (int32_t p : starts)
          for (int32_t k = 0; k < 4; ++k) pos.push_back(p + k * (p % 3 + 1));  // ascending, gaps of 1-3
        const uint32_t seed = uint32_t(1000 * run + D + 7 * tiles);
        const auto k = randn(NB * B * Hkv * D, seed), v = randn(NB * B * Hkv * D, seed + 1);
        const auto qs = randn(size_t(queries * D), seed + 2, 2.0f);
        const QuantizedKv qkv(kind, k, v, D);
        const kernels::PagedKvView f32{k.data(), v.data(), B, Hkv, D};
        const kernels::PagedKvQuantView quant = qkv.view(B, Hkv, D);
        for (int64_t kvh = 0; kvh < Hkv; ++kvh) {
          const size_t nq = size_t(queries);
          std::vector<std::vector<float>> st(nq), ot(nq, std::vector<float>(size_t(D), NAN));
          std::vector<const float*> q(nq);
          std::vector<float*> sp(nq), op(nq);
          for (size_t i = 0; i < nq; ++i) {
            st[i].assign(size_t(kernels::paged_attention_scratch(pos[i])), NAN);
            q[i] = qs.data() + int64_t(i) * D, sp[i] = st[i].data(), op[i] = ot[i].data();
          }
          REQUIRE((kind == 0 ? kernels::paged_attention_tiles(tiles, q.data(), pos.data(), f32, table.data(), kvh,
                                                              0.125f, sp.data(), op.data(), softcap)
                             : kernels::paged_attention_tiles_quant(tiles, q.data(), pos.data(), quant, table.data(),
                                                                    kvh, 0.125f, sp.data(), op.data(), nullptr,
                                                                    nullptr, softcap)));
          for (size_t i = 0; i < nq; ++i) {
            std::vector<float> s1(st[i].size(), NAN), o1(size_t(D), NAN);
            if (kind == 0 && softcap > 0)
              kernels::paged_attention_head_softcap(q[i], f32, table.data(), pos[i], kvh, 0.125f, softcap, s1.data(),
                                                    o1.data());
            else if (kind == 0)
              kernels::paged_attention_head(q[i], f32, table.data(), pos[i], kvh, 0.125f, s1.data(), o1.data());
            else
              kernels::paged_attention_head_quant(q[i], quant, table.data(), pos[i], kvh, 0.125f, s1.data(),
                                                  o1.data(), nullptr, 0, softcap);
            INFO("kind " << kind << " softcap " << softcap << " D " << D << " tiles " << tiles << " query " << i << " at " << pos[i]);
            CHECK(std::memcmp(ot[i].data(), o1.data(), size_t(D) * 4) == 0);
            CHECK(std::memcmp(st[i].data(), s1.data(), size_t(pos[i] + 1) * 4) == 0);
            ++checked;
          }
        }
      }
  // 6 runs x AVX-512's {16, 32, 64, 80, 96, 128, 256} or AVX2's {32, 64, 96, 128, 256}
  const int sizes = 6 * (kernels::paged_attention_split_runs(16) ? 7 : 5);
  CHECK(checked == sizes * 2 * (2 + 3 + 8 + 8) * 4);
  // more tiles than a call takes, or none: nothing runs
  const std::vector<float> z(size_t(NB * B * Hkv * 64));
  const kernels::PagedKvView f32{z.data(), z.data(), B, Hkv, 64};
  std::vector<const float*> q(36, z.data());
  std::vector<float*> sp(36, nullptr), op(36, nullptr);
  std::vector<int32_t> pos(36, 4);
  CHECK_FALSE(kernels::paged_attention_tiles(kernels::kPagedAttentionMaxTiles + 1, q.data(), pos.data(), f32,
                                             table.data(), 0, 1.f, sp.data(), op.data()));
  CHECK_FALSE(kernels::paged_attention_tiles(0, q.data(), pos.data(), f32, table.data(), 0, 1.f, sp.data(), op.data()));
}

TEST_CASE("tiles of a prompt's several blocks, each reading its own block's exact rows, equal single calls") {
  // A prompt over an int8 / fp8 cache with each block's exact rows beside it (kernels/cpu/attention.h:
  // exact_froms): tiles of up to three blocks in one call, in any order, with and without a sliding
  // window; every query's bits those of paged_attention_head_quant given its own block's exact rows.
  const int64_t B = 16, Hkv = 2, NB = 12;
  const std::vector<int32_t> table = {7, 2, 11, 0, 5, 9, 3, 1, 4, 10, 6};
  const std::vector<std::vector<int32_t>> tile_offsets = {  // from the first tile's block start F
      {0, 4, 8, 12, 16, 20, 24, 28}, {4, 20, 36}, {16, 0, 32, 8}, {12, 16}};
  int checked = 0, differ = 0;
  for (int kind = 1; kind < 3; ++kind)
    for (int64_t D : {32, 64, 128})
      for (int32_t F : {0, 32, 96})
        for (const auto& offsets : tile_offsets)
          for (bool window : {false, true}) {
            const kernels::KvQuant quant_kind = kind == 1 ? kernels::KvQuant::Int8 : kernels::KvQuant::Fp8;
            if (!kernels::paged_attention_quant_in_place(quant_kind, D, true)) continue;
            const int tiles = int(offsets.size()), queries = 4 * tiles;
            std::vector<int32_t> pos, froms, firsts;
            int32_t last = 0;
            for (int32_t o : offsets) {
              froms.push_back((F + o) / int32_t(B) * int32_t(B));
              for (int32_t k = 0; k < 4; ++k) pos.push_back(F + o + k), last = std::max(last, F + o + k);
            }
            for (int32_t p : pos) firsts.push_back(window ? std::max(0, p - 21) : 0);
            const uint32_t seed = uint32_t(17 * kind + D + 3 * F + tiles + (window ? 500 : 0));
            const auto k = randn(NB * B * Hkv * D, seed, 2.0f), v = randn(NB * B * Hkv * D, seed + 1, 2.0f);
            const auto qs = randn(size_t(queries * D), seed + 2);
            // exact rows of positions [F, last], each [Hkv, D], unlike the cache's
            const auto ek = randn(size_t((last + 1 - F) * Hkv * D), seed + 3);
            const auto ev = randn(ek.size(), seed + 4);
            const QuantizedKv qkv(kind, k, v, D);
            const kernels::PagedKvQuantView view = qkv.view(B, Hkv, D);
            for (int64_t kvh = 0; kvh < Hkv; ++kvh) {
              auto rows_from = [&](int32_t from) {  // the exact rows of keys from `from` on
                const int64_t at = int64_t(from - F) * Hkv * D + kvh * D;
                return kernels::KvExactRows{ek.data() + at, ev.data() + at, from, Hkv * D};
              };
              const kernels::KvExactRows exact = rows_from(F);
              const size_t nq = static_cast<size_t>(queries);
              std::vector<std::vector<float>> st(nq), ot(nq, std::vector<float>(static_cast<size_t>(D)));
              std::vector<const float*> q(nq);
              std::vector<float*> sp(nq), op(nq);
              for (int i = 0; i < queries; ++i) {
                st[size_t(i)].assign(size_t(kernels::paged_attention_scratch(pos[size_t(i)])), NAN);
                q[size_t(i)] = qs.data() + int64_t(i) * D, sp[size_t(i)] = st[size_t(i)].data();
                op[size_t(i)] = ot[size_t(i)].data();
              }
              REQUIRE(kernels::paged_attention_tiles_quant(tiles, q.data(), pos.data(), view, table.data(), kvh,
                                                           0.125f, sp.data(), op.data(), &exact,
                                                           window ? firsts.data() : nullptr, 0.0f, froms.data()));
              for (int i = 0; i < queries; ++i) {
                const int32_t p = pos[size_t(i)];
                const kernels::KvExactRows own = rows_from(froms[size_t(i / 4)]);
                std::vector<float> s1(st[size_t(i)].size(), NAN), o1(size_t(D), NAN);
                kernels::paged_attention_head_quant(q[size_t(i)], view, table.data(), p, kvh, 0.125f, s1.data(),
                                                    o1.data(), &own, firsts[size_t(i)]);
                INFO("kind " << kind << " D " << D << " F " << F << " tiles " << tiles << " window " << window
                              << " query at " << p);
                CHECK(std::memcmp(ot[size_t(i)].data(), o1.data(), size_t(D) * 4) == 0);
                if (!window) CHECK(std::memcmp(st[size_t(i)].data(), s1.data(), size_t(p + 1) * 4) == 0);
                // the same query reading every key from F exact (a block it does not own): other bits
                if (froms[size_t(i / 4)] > F) {
                  kernels::paged_attention_head_quant(q[size_t(i)], view, table.data(), p, kvh, 0.125f, s1.data(),
                                                      o1.data(), &exact, firsts[size_t(i)]);
                  differ += std::memcmp(ot[size_t(i)].data(), o1.data(), size_t(D) * 4) != 0;
                }
                ++checked;
              }
            }
          }
  if (checked == 0) LLMCTL_SKIP("no in-place kernel for exact rows on this CPU");
  CHECK(differ > checked / 4);
  // a tile's from off the 4-key grid, before the rows' start or past its first query: refused
  const auto z = randn(size_t(NB * B * Hkv * 64), 5);
  const QuantizedKv zq(2, z, z, 64);
  const kernels::PagedKvQuantView zv = zq.view(B, Hkv, 64);
  const kernels::KvExactRows ex{z.data(), z.data(), 16, Hkv * 64};
  const int32_t pos[4] = {20, 21, 22, 23};
  const float* q[4] = {z.data(), z.data(), z.data(), z.data()};
  std::vector<float> s(64), o(64);
  float* sp[4] = {s.data(), s.data(), s.data(), s.data()};
  float* op[4] = {o.data(), o.data(), o.data(), o.data()};
  for (int32_t bad : {18, 8, 24}) {
    const int32_t froms[1] = {bad};
    if (bad % 4 == 0) {
      CHECK_THROWS(kernels::paged_attention_tiles_quant(1, q, pos, zv, table.data(), 0, 1.f, sp, op, &ex, nullptr, 0.0f,
                                                        froms));
    } else {
      CHECK_FALSE(kernels::paged_attention_tiles_quant(1, q, pos, zv, table.data(), 0, 1.f, sp, op, &ex, nullptr,
                                                       0.0f, froms));
    }
  }
}
