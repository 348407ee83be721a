// The AVX-512 attention kernels' own cases (four queries at once over every cache kind, exact rows
// beside an int8 / fp8 cache read in place): a file of their own, so that a CPU without AVX-512
// reports these skipped and test_cpu_kernels' other cases passed (ctest counts a file as one entry).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_impl.h"
#include "kernels/cpu/kv_quant.h"
#include "kernels/cpu/qlinear_impl.h"
#include "tests/unit/attention_test_util.h"
#include "tests/unit/skip.h"

using namespace llmctl;
using test::QuantizedKv;
using test::randn;

TEST_CASE("paged attention of four query tokens at once equals four single calls, bit for bit") {
  if (!kernels::detail::cpu_has_avx512_vnni())
    LLMCTL_SKIP("this CPU has no AVX-512 (the AVX2 four-token kernels have their own test below)");
  const int64_t B = 16, Hkv = 2, NB = 12;
  const std::vector<int32_t> table = {7, 2, 11, 0, 5, 9, 3, 1, 4, 10, 6};
  const std::vector<std::vector<int32_t>> position_sets = {
      {0, 1, 2, 3}, {2, 3, 4, 5}, {16, 17, 18, 19}, {37, 38, 39, 40}, {5, 9, 40, 41}, {99, 100, 150, 160}};
  int checked = 0;
  for (int kind = 0; kind < 3; ++kind)  // f32, int8, fp8
    for (int64_t D : {16, 64, 80, 128, 256})
      for (const auto& pos : position_sets) {
        const uint32_t seed = uint32_t(100 * kind + D + pos[3]);
        const auto k = randn(NB * B * Hkv * D, seed), v = randn(NB * B * Hkv * D, seed + 1);
        const auto qs = randn(4 * D, seed + 2, 2.0f);
        const QuantizedKv qkv(kind, k, v, D);
        const kernels::PagedKvView f32{k.data(), v.data(), B, Hkv, D};
        const kernels::PagedKvQuantView quant = qkv.view(B, Hkv, D);
        for (int64_t kvh = 0; kvh < Hkv; ++kvh) {
          std::vector<std::vector<float>> s4(4), s1(4), o4(4, std::vector<float>(size_t(D), NAN)), o1 = o4;
          const float* q[4];
          float *sp[4], *op[4];
          for (int t = 0; t < 4; ++t) {
            s4[size_t(t)].assign(size_t(kernels::paged_attention_scratch(pos[size_t(t)])), NAN);
            s1[size_t(t)] = s4[size_t(t)];
            q[t] = qs.data() + t * D, sp[t] = s4[size_t(t)].data(), op[t] = o4[size_t(t)].data();
          }
          const bool ran =
              kind == 0 ? kernels::paged_attention_tiles(1, q, pos.data(), f32, table.data(), kvh, 0.125f, sp, op)
                        : kernels::paged_attention_tiles_quant(1, q, pos.data(), quant, table.data(), kvh, 0.125f, sp,
                                                               op);
          REQUIRE(ran);
          for (int t = 0; t < 4; ++t) {
            if (kind == 0)
              kernels::paged_attention_head(q[t], f32, table.data(), pos[size_t(t)], kvh, 0.125f, s1[size_t(t)].data(),
                                            o1[size_t(t)].data());
            else
              kernels::paged_attention_head_quant(q[t], quant, table.data(), pos[size_t(t)], kvh, 0.125f,
                                                  s1[size_t(t)].data(), o1[size_t(t)].data());
            INFO("kind " << kind << " D " << D << " query " << t << " at " << pos[size_t(t)] << " kvh " << kvh);
            CHECK(std::memcmp(o4[size_t(t)].data(), o1[size_t(t)].data(), size_t(D) * 4) == 0);
            CHECK(std::memcmp(s4[size_t(t)].data(), s1[size_t(t)].data(), size_t(pos[size_t(t)] + 1) * 4) == 0);
            ++checked;
          }
        }
      }
  CHECK(checked == 3 * 5 * 6 * 2 * 4);
  const float* q[4] = {nullptr, nullptr, nullptr, nullptr};
  float *sp[4] = {}, *op[4] = {};
  const int32_t pos[4] = {0, 1, 2, 3}, t0[1] = {0};
  const std::vector<float> z(72);
  CHECK_FALSE(kernels::paged_attention_tiles(1, q, pos, {z.data(), z.data(), 1, 1, 72}, t0, 0, 1.f, sp, op));
}

TEST_CASE("exact rows beside an int8 / fp8 cache: in place equals the copy with the open block's rows replaced") {
  if (!kernels::detail::cpu_has_avx512_vnni())
    LLMCTL_SKIP("this CPU has no AVX-512 (the caller dequantizes the context and puts the exact rows in the copy)");
  const int64_t B = 16, Hkv = 2, NB = 12;
  const std::vector<int32_t> table = {7, 2, 11, 0, 5, 9, 3, 1, 4, 10, 6};
  int checked = 0;
  for (int kind = 1; kind < 3; ++kind)  // int8, fp8
    for (int64_t D : {16, 64, 128, 256})
      for (int32_t pos : {0, 5, 15, 16, 31, 40, 100, 160}) {
        const uint32_t seed = uint32_t(300 * kind + D + pos);
        const auto k = randn(NB * B * Hkv * D, seed, 2.0f), v = randn(NB * B * Hkv * D, seed + 1, 2.0f);
        const auto q = randn(D, seed + 2);
        const QuantizedKv qkv(kind, k, v, D);
        const kernels::PagedKvQuantView view = qkv.view(B, Hkv, D);
        // The open block's exact rows: its positions [from, pos], each [Hkv, D], unlike the cache's.
        const int32_t from = pos / int32_t(B) * int32_t(B), n = pos + 1;
        const auto ek = randn((n - from) * Hkv * D, seed + 3), ev = randn((n - from) * Hkv * D, seed + 4);
        std::vector<float> kf(size_t(n * Hkv * D)), vf(kf.size());
        kernels::dequantize_kv_positions(view, table.data(), 0, n, kf.data(), vf.data());
        std::copy(ek.begin(), ek.end(), kf.begin() + from * Hkv * D);
        std::copy(ev.begin(), ev.end(), vf.begin() + from * Hkv * D);
        const int32_t first_block[1] = {0};
        const kernels::PagedKvView copy{kf.data(), vf.data(), n, Hkv, D};
        for (int64_t kvh = 0; kvh < Hkv; ++kvh) {
          const size_t ns = size_t(kernels::paged_attention_scratch(pos));
          std::vector<float> s1(ns, NAN), s2(ns, NAN), a(size_t(D), NAN), b(size_t(D), NAN);
          kernels::detail::paged_attention_head_portable(q.data(), copy, first_block, pos, kvh, 0.125f, s2.data(),
                                                         b.data());
          const kernels::KvExactRows exact{ek.data() + kvh * D, ev.data() + kvh * D, from, Hkv * D};
          kernels::paged_attention_head_quant(q.data(), view, table.data(), pos, kvh, 0.125f, s1.data(), a.data(),
                                              &exact);
          INFO("kind " << kind << " D " << D << " position " << pos << " kvh " << kvh);
          CHECK(std::memcmp(a.data(), b.data(), size_t(D) * 4) == 0);
          CHECK(std::memcmp(s1.data(), s2.data(), size_t(n) * 4) == 0);
          // and the exact rows were read: the cache's own rows give another result (never equal
          // here: the exact rows are fresh random values)
          std::vector<float> c(size_t(D), NAN);
          kernels::paged_attention_head_quant(q.data(), view, table.data(), pos, kvh, 0.125f, s1.data(), c.data());
          CHECK(std::memcmp(c.data(), b.data(), size_t(D) * 4) != 0);
          ++checked;
        }
        // Four queries in the open block at once, and two tiles (the second from the block's start):
        // the single calls' bits.
        if (pos % B > 3) {
          const int32_t p8[8] = {pos - 3, pos - 2, pos - 1, pos, from, from + 1, from + 2, from + 3};
          const auto qs = randn(8 * D, seed + 5);
          for (int tiles = 1; tiles <= 2; ++tiles)
            for (int64_t kvh = 0; kvh < Hkv; ++kvh) {
              const kernels::KvExactRows exact{ek.data() + kvh * D, ev.data() + kvh * D, from, Hkv * D};
              const size_t ns = size_t(kernels::paged_attention_scratch(pos));
              std::vector<std::vector<float>> s8(8, std::vector<float>(ns, NAN));
              std::vector<std::vector<float>> o8(8, std::vector<float>(size_t(D), NAN)), o1 = o8, s1 = s8;
              const float* qp[8];
              float *sp[8], *op[8];
              for (int t = 0; t < 8; ++t)
                qp[t] = qs.data() + t * D, sp[t] = s8[size_t(t)].data(), op[t] = o8[size_t(t)].data();
              REQUIRE(kernels::paged_attention_tiles_quant(tiles, qp, p8, view, table.data(), kvh, 0.125f, sp, op,
                                                           &exact));
              for (int t = 0; t < 4 * tiles; ++t) {
                kernels::paged_attention_head_quant(qp[t], view, table.data(), p8[t], kvh, 0.125f, s1[size_t(t)].data(),
                                                    o1[size_t(t)].data(), &exact);
                INFO("tiles " << tiles << ": kind " << kind << " D " << D << " query at " << p8[t] << " kvh " << kvh);
                CHECK(std::memcmp(o8[size_t(t)].data(), o1[size_t(t)].data(), size_t(D) * 4) == 0);
                ++checked;
              }
            }
        }
      }
  CHECK(checked == 2 * 4 * 8 * 2 + 2 * 4 * 5 * 2 * (4 + 8));
}
