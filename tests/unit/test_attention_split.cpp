// Decode attention in stages (kernels/cpu/attention.h: paged_attention_split_*) against the whole-head
// kernels, bit for bit: random caches (f32, int8, fp8) over scattered blocks, GQA groups of 1 to 7
// query heads, keys cut into chunks of several sizes and run in reverse, columns cut as the caller may,
// exact open-block rows beside int8 / fp8 caches, soft-capped scores; and the CPU backend's
// SplitDecodeAttention over a step's tokens (engine/backend/cpu/cpu_split_attention.h), in one pass and
// in several.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "engine/backend/cpu/cpu_split_attention.h"
#include "kernels/cpu/attention.h"
#include "tests/unit/attention_test_util.h"
#include "tests/unit/skip.h"

using namespace llmctl;

using test::randn;

namespace {

bool split_runs(int kind, int64_t D) {
  return kind == 0 ? kernels::paged_attention_split_runs(D)
                   : kernels::paged_attention_split_runs(kind == 1 ? kernels::KvQuant::Int8 : kernels::KvQuant::Fp8, D);
}

}  // namespace

TEST_CASE("decode attention in stages equals the whole-head kernels bit for bit") {
  if (!kernels::paged_attention_split_runs(64)) LLMCTL_SKIP("no SIMD attention kernel on this CPU");
  const int64_t B = 16, Hkv = 2, NB = 72;
  std::vector<int32_t> table(static_cast<size_t>(NB));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937(5));
  const int64_t unit = kernels::paged_attention_split_columns();
  int checked = 0;
  for (int kind = 0; kind < 3; ++kind)  // f32, int8, fp8
    for (int64_t D : {16, 32, 48, 64, 96, 128, 256}) {
      if (!split_runs(kind, D)) continue;
      const uint32_t seed = uint32_t(31 * D + kind);
      const auto k = randn(size_t(NB * B * Hkv * D), seed), v = randn(size_t(NB * B * Hkv * D), seed + 1);
      const test::QuantizedKv qkv(kind, k, v, D);
      const kernels::PagedKvView f32{k.data(), v.data(), B, Hkv, D};
      const kernels::PagedKvQuantView quant = qkv.view(B, Hkv, D);
      for (int group : {1, 2, 3, 5, 6, 7})
        for (int32_t position : {0, 1, 15, 16, 17, 64, 200, 1000}) {
          const auto qs = randn(size_t(group * D), seed + uint32_t(position) + 7u * uint32_t(group), 2.0f);
          const size_t ns = size_t(kernels::paged_attention_scratch(position));
          for (int64_t kvh = 0; kvh < Hkv; ++kvh)
            for (int32_t chunk : {16, 64, 256}) {
              const float softcap = chunk == 64 ? 3.0f : 0.0f;  // Gemma 2's soft-capped scores, in one case of three
              // the reference: each query head whole
              std::vector<std::vector<float>> s1(size_t(group), std::vector<float>(ns, NAN)), o1 = s1;
              for (int g = 0; g < group; ++g) {
                o1[size_t(g)].assign(size_t(D), NAN);
                const float* q = qs.data() + g * D;
                if (kind == 0 && softcap > 0)
                  kernels::paged_attention_head_softcap(q, f32, table.data(), position, kvh, 0.125f, softcap,
                                                        s1[size_t(g)].data(), o1[size_t(g)].data());
                else if (kind == 0)
                  kernels::paged_attention_head(q, f32, table.data(), position, kvh, 0.125f, s1[size_t(g)].data(),
                                                o1[size_t(g)].data());
                else
                  kernels::paged_attention_head_quant(q, quant, table.data(), position, kvh, 0.125f,
                                                      s1[size_t(g)].data(), o1[size_t(g)].data(), nullptr, 0, softcap);
              }
              // the stages, keys in chunks run last to first, columns in pieces of `unit` and the rest
              std::vector<std::vector<float>> s2 = s1, o2 = o1;
              const size_t G = static_cast<size_t>(group);
              std::vector<const float*> q(G);
              std::vector<float*> sp(G), op(G);
              std::vector<float> inv(G);
              for (int g = 0; g < group; ++g) {
                std::fill(s2[size_t(g)].begin(), s2[size_t(g)].end(), NAN);
                std::fill(o2[size_t(g)].begin(), o2[size_t(g)].end(), NAN);
                q[size_t(g)] = qs.data() + g * D;
                sp[size_t(g)] = s2[size_t(g)].data(), op[size_t(g)] = o2[size_t(g)].data();
              }
              const kernels::SplitAttentionQueries s{q.data(), sp.data(), op.data(), group, position, kvh};
              const int32_t n = position + 1;
              for (int32_t j0 = (n - 1) / chunk * chunk; j0 >= 0; j0 -= chunk) {
                const int32_t j1 = std::min(n, j0 + chunk);
                if (kind == 0)
                  kernels::paged_attention_split_scores(s, f32, table.data(), 0.125f, j0, j1);
                else
                  kernels::paged_attention_split_scores(s, quant, table.data(), 0.125f, j0, j1);
              }
              for (int g = 0; g < group; ++g)
                inv[size_t(g)] = kernels::paged_attention_split_softmax(sp[size_t(g)], position, 0, softcap);
              const int64_t first = chunk == 16 ? unit : D;  // one piece of `unit` columns, then the rest
              const int64_t cut = std::min(first, D);
              for (auto [d0, w] : {std::pair<int64_t, int64_t>{0, cut}, {cut, D - cut}})
                if (w > 0) {
                  if (kind == 0)
                    kernels::paged_attention_split_values(s, f32, table.data(), d0, w);
                  else
                    kernels::paged_attention_split_values(s, quant, table.data(), d0, w);
                }
              for (int g = 0; g < group; ++g) {
                INFO("kind " << kind << " D " << D << " group " << group << " query " << g << " at " << position
                             << " kvh " << kvh << " chunk " << chunk << " softcap " << softcap);
                CHECK(std::memcmp(o2[size_t(g)].data(), o1[size_t(g)].data(), size_t(D) * 4) == 0);
                // stage 2 leaves the probabilities the whole kernel multiplies its values by: e_j x inv
                bool probabilities = true;
                for (int32_t j = 0; j < n; ++j)
                  probabilities &= s2[size_t(g)][size_t(j)] == s1[size_t(g)][size_t(j)] * inv[size_t(g)];
                CHECK(probabilities);
                CHECK(std::isfinite(o2[size_t(g)][size_t(D - 1)]));
                ++checked;
              }
            }
        }
    }
  // per kind and head size: 16 queries x 8 positions x 2 kv heads x 3 chunk sizes; AVX2 runs f32 and
  // int8 at four head sizes, AVX-512 all three kinds at six
  CHECK(checked >= 8 * 16 * 8 * 2 * 3);
}

TEST_CASE("decode attention in stages refuses keys and columns off its grid") {
  if (!kernels::paged_attention_split_runs(64)) LLMCTL_SKIP("no SIMD attention kernel on this CPU");
  const std::vector<float> kv(size_t(4 * 16 * 64), 0.5f), q(64, 1.0f);
  std::vector<float> scores(size_t(kernels::paged_attention_scratch(40))), out(64);
  const int32_t table[4] = {0, 1, 2, 3};
  const float* qp = q.data();
  float *sp = scores.data(), *op = out.data();
  const kernels::SplitAttentionQueries s{&qp, &sp, &op, 1, 40, 0};
  const kernels::PagedKvView c{kv.data(), kv.data(), 16, 1, 64};
  CHECK_THROWS(kernels::paged_attention_split_scores(s, c, table, 1.0f, 8, 32));   // j0 not a multiple of 16
  CHECK_THROWS(kernels::paged_attention_split_scores(s, c, table, 1.0f, 16, 40));  // j1 neither
  CHECK_THROWS(kernels::paged_attention_split_scores(s, c, table, 1.0f, 32, 48));  // past position + 1
  CHECK_THROWS(kernels::paged_attention_split_values(s, c, table, 4, 16));         // columns off the grid
  CHECK_THROWS(kernels::paged_attention_split_values(s, c, table, 48, 32));        // past head_dim
  kernels::paged_attention_split_scores(s, c, table, 1.0f, 0, 41);
  CHECK(kernels::paged_attention_split_softmax(sp, 40) == doctest::Approx(1.0 / 41));
  kernels::paged_attention_split_values(s, c, table, 0, 64);
  for (float x : out) CHECK(x == doctest::Approx(0.5f));  // equal keys: the mean of equal values
}

TEST_CASE("the CPU backend's split decode attention equals each head run whole, in one pass or several") {
  if (!kernels::paged_attention_split_runs(64)) LLMCTL_SKIP("no SIMD attention kernel on this CPU");
  const int64_t B = 16, Hkv = 3, hq = 9, D = 64, NB = 3 * 80, W = (hq + 2 * Hkv) * D;
  const auto k = randn(size_t(NB * B * Hkv * D), 11), v = randn(size_t(NB * B * Hkv * D), 12);
  const kernels::PagedKvView cache{k.data(), v.data(), B, Hkv, D};
  std::vector<int32_t> blocks(static_cast<size_t>(NB));
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin(), blocks.end(), std::mt19937(3));
  // three sequences of 80 blocks each, decode tokens at rows 0, 2 and 3 of qkv (row 1 unused)
  const std::vector<cpu::SplitDecodeToken> tokens = {
      {0, blocks.data(), 1000}, {2, blocks.data() + 80, 257}, {3, blocks.data() + 160, 1279}};
  const auto qkv = randn(size_t(4 * W), 13, 2.0f);
  std::vector<float> whole(size_t(4 * hq * D), NAN);
  for (const auto& t : tokens)
    for (int64_t h = 0; h < hq; ++h) {
      std::vector<float> scratch(size_t(kernels::paged_attention_scratch(t.position)));
      kernels::paged_attention_head(qkv.data() + t.row * W + h * D, cache, t.block_table, t.position, h / 3, 0.125f,
                                    scratch.data(), whole.data() + (t.row * hq + h) * D);
    }
  for (int threads : {1, 2, 3, 16})  // 16: the chunk and column pieces sized for many threads
    for (int64_t max_floats : {int64_t(1) << 24, int64_t(1)}) {  // one pass; a pass per token
      ThreadPool pool(threads);
      cpu::SplitDecodeAttention split(max_floats);
      std::vector<float> out(whole.size(), NAN);
      split.run(pool, tokens, qkv.data(), W, cache, int(hq), int(Hkv), 0.125f, out.data());
      INFO("threads " << threads << " max scratch floats " << max_floats);
      for (const auto& t : tokens)
        CHECK(std::memcmp(out.data() + t.row * hq * D, whole.data() + t.row * hq * D, size_t(hq * D) * 4) == 0);
      CHECK(std::isnan(out[size_t(hq * D)]));  // row 1 untouched
    }
}

TEST_CASE("decode attention in stages with exact open-block rows equals the whole-head kernel bit for bit") {
  if (!kernels::paged_attention_split_runs(64)) LLMCTL_SKIP("no SIMD attention kernel on this CPU");
  const int64_t B = 16, Hkv = 2, NB = 24, G = 3;
  std::vector<int32_t> table(static_cast<size_t>(NB));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937(9));
  int checked = 0;
  for (int kind = 1; kind < 3; ++kind)  // int8, fp8
    for (int64_t D : {16, 64, 128, 256})
      for (int32_t pos : {0, 15, 16, 40, 100, 300}) {
        if (!kernels::paged_attention_split_runs(kind == 1 ? kernels::KvQuant::Int8 : kernels::KvQuant::Fp8, D, true))
          continue;  // AVX2: head_dim 16
        const uint32_t seed = uint32_t(500 * kind + D + pos);
        const auto k = randn(size_t(NB * B * Hkv * D), seed, 2.0f), v = randn(size_t(NB * B * Hkv * D), seed + 1, 2.0f);
        const test::QuantizedKv qkv(kind, k, v, D);
        const kernels::PagedKvQuantView view = qkv.view(B, Hkv, D);
        // the open block's exact rows: positions [from, pos], each [Hkv, D], unlike the cache's
        const int32_t from = pos / int32_t(B) * int32_t(B), n = pos + 1;
        const auto ek = randn(size_t((n - from) * Hkv * D), seed + 3), ev = randn(size_t((n - from) * Hkv * D), seed + 4);
        const auto qs = randn(size_t(G * D), seed + 5, 2.0f);
        const size_t ns = size_t(kernels::paged_attention_scratch(pos));
        for (int64_t kvh = 0; kvh < Hkv; ++kvh) {
          const kernels::KvExactRows exact{ek.data() + kvh * D, ev.data() + kvh * D, from, Hkv * D};
          std::vector<std::vector<float>> s1(size_t(G), std::vector<float>(ns, NAN)), s2 = s1;
          std::vector<std::vector<float>> o1(size_t(G), std::vector<float>(size_t(D), NAN)), o2 = o1;
          std::vector<const float*> q(static_cast<size_t>(G));
          std::vector<float*> sp(static_cast<size_t>(G)), op(static_cast<size_t>(G));
          for (int64_t g = 0; g < G; ++g) {
            q[size_t(g)] = qs.data() + g * D, sp[size_t(g)] = s2[size_t(g)].data(), op[size_t(g)] = o2[size_t(g)].data();
            kernels::paged_attention_head_quant(q[size_t(g)], view, table.data(), pos, kvh, 0.125f, s1[size_t(g)].data(),
                                                o1[size_t(g)].data(), &exact);
          }
          kernels::SplitAttentionQueries s{q.data(), sp.data(), op.data(), int(G), pos, kvh};
          s.exact = &exact;
          for (int32_t j0 = (n - 1) / 64 * 64; j0 >= 0; j0 -= 64)
            kernels::paged_attention_split_scores(s, view, table.data(), 0.125f, j0, std::min(n, j0 + 64));
          for (int64_t g = 0; g < G; ++g) kernels::paged_attention_split_softmax(sp[size_t(g)], pos);
          kernels::paged_attention_split_values(s, view, table.data(), 0, D);
          for (int64_t g = 0; g < G; ++g) {
            INFO("kind " << kind << " D " << D << " position " << pos << " kvh " << kvh << " query " << g);
            CHECK(std::memcmp(o2[size_t(g)].data(), o1[size_t(g)].data(), size_t(D) * 4) == 0);
            ++checked;
          }
        }
      }
  CHECK(checked == 2 * (kernels::paged_attention_split_runs(16) ? 4 : 3) * 6 * 2 * 3);
  // exact rows off the 16-key grid, and with an f32 cache, are refused
  const std::vector<float> kv(size_t(4 * 16 * 64), 0.5f), q(64, 1.0f);
  std::vector<float> scores(size_t(kernels::paged_attention_scratch(40))), out(64);
  const int32_t t4[4] = {0, 1, 2, 3};
  const float* qp = q.data();
  float *sp = scores.data(), *op = out.data();
  const kernels::KvExactRows odd{kv.data(), kv.data(), 8, 64};
  kernels::SplitAttentionQueries s{&qp, &sp, &op, 1, 40, 0};
  s.exact = &odd;
  CHECK_THROWS(kernels::paged_attention_split_scores(s, kernels::PagedKvView{kv.data(), kv.data(), 16, 1, 64}, t4, 1.0f,
                                                     0, 41));
}

TEST_CASE("a decode token takes the stages where their cost beats its heads run whole") {
  // cost x items over threads against the busiest thread's whole heads
  CHECK(cpu::split_decode_attention_pays(1.05, 9, 2));    // 4.7 heads' time a thread against 5
  CHECK_FALSE(cpu::split_decode_attention_pays(1.12, 9, 2));  // 5.04 against 5
  CHECK_FALSE(cpu::split_decode_attention_pays(1.0, 9, 1));   // one thread: only a cost under 1 pays
  CHECK(cpu::split_decode_attention_pays(0.99, 9, 1));
  CHECK(cpu::split_decode_attention_pays(1.7, 9, 16));        // 7 of 16 threads idle whole
  CHECK_FALSE(cpu::split_decode_attention_pays(1.01, 32, 16));  // even
  CHECK_FALSE(cpu::split_decode_attention_pays(0.5, 0, 2));
  CHECK_FALSE(cpu::split_decode_attention_pays(0.5, 9, 0));
  if (!kernels::paged_attention_split_runs(64)) LLMCTL_SKIP("no SIMD attention kernel on this CPU");
  // the curves fall with the context (more of the time is reading rows the stages read once per group)
  for (int kind = 0; kind < 2; ++kind) {
    auto cost = [&](int32_t keys) {
      return kind == 0 ? kernels::paged_attention_split_cost(keys)
                       : kernels::paged_attention_split_cost(kernels::KvQuant::Int8, keys);
    };
    CHECK(std::isinf(cost(127)));  // not measured below 128 keys: never split
    double last = cost(128);
    for (int32_t keys = 129; keys <= 1 << 16; keys += std::max(1, keys / 7)) {
      INFO("kind " << kind << " keys " << keys);
      const double c = cost(keys);
      CHECK(std::isfinite(c));
      CHECK(c > 0.5);
      CHECK(c <= last);
      last = c;
    }
  }
  // short contexts whole on one thread, long ones split
  CHECK(kernels::paged_attention_split_cost(128) > 1.0);
  CHECK(kernels::paged_attention_split_cost(4096) < 1.0);
  CHECK_FALSE(cpu::split_decode_attention_pays(kernels::paged_attention_split_cost(16), 9, 16));
}
