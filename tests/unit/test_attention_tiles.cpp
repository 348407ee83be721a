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
