// Sliding-window attention read in place (kernels/cpu/attention.h: a query's `first` key): single
// queries against a double-precision softmax over keys [first, position] (int8 / fp8 in place against
// the f32 kernel over their dequantized rows, soft-capped too), the keys before `first`
// shown unread or masked (other values there change no bit, NaN before the window's start neither),
// the SIMD kernels against the portable one bit for bit, tiles (whose keys are counted from the
// lowest query's start) and the decode stages against single queries bit for bit, over f32, int8 and
// fp8 caches in scattered blocks. ctest runs it natively and stepped down to AVX2.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_impl.h"
#include "kernels/kernel_check.h"
#include "tests/unit/attention_test_util.h"
#include "tests/unit/skip.h"

using namespace llmctl;
using test::QuantizedKv;
using test::randn;

namespace {

constexpr int64_t kB = 16, kHkv = 2, kNB = 12;
const std::vector<int32_t> kTable = {7, 2, 11, 0, 5, 9, 3, 1, 4, 10, 6};
constexpr float kScale = 0.125f;

// Row of key j (kv head kvh) in a [NB, B, Hkv, D] cache through kTable.
int64_t row_of(int32_t j, int64_t kvh, int64_t D) { return ((kTable[j / kB] * kB + j % kB) * kHkv + kvh) * D; }

// One query's output over the cache of `kind` (0 f32, 1 int8, 2 fp8) built from k, v.
std::vector<float> one_query(int kind, const std::vector<float>& k, const std::vector<float>& v, int64_t D,
                             const float* q, int32_t position, int32_t first, int64_t kvh, float softcap = 0.0f) {
  std::vector<float> s(size_t(kernels::paged_attention_scratch(position)), NAN), o(size_t(D), NAN);
  const kernels::PagedKvView f32{k.data(), v.data(), kB, kHkv, D};
  if (kind == 0 && softcap > 0)
    kernels::paged_attention_head_softcap(q, f32, kTable.data(), position, kvh, kScale, softcap, s.data(), o.data(),
                                          first);
  else if (kind == 0)
    kernels::paged_attention_head(q, f32, kTable.data(), position, kvh, kScale, s.data(), o.data(), first);
  else
    kernels::paged_attention_head_quant(q, QuantizedKv(kind, k, v, D).view(kB, kHkv, D), kTable.data(), position,
                                        kvh, kScale, s.data(), o.data(), nullptr, first, softcap);
  return o;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Whether this CPU reads a cache of `kind` in place at head size D (f32: always, by some variant).
bool runs(int kind, int64_t D) {
  if (kind == 0) return true;
  return kernels::paged_attention_quant_in_place(kind == 1 ? kernels::KvQuant::Int8 : kernels::KvQuant::Fp8, D);
}

}  // namespace

TEST_CASE("sliding-window attention: keys [first, position] against double; keys before first unread or masked") {
  // (position, first): windows from their start, within a block, across blocks, a window of one key
  const std::vector<std::pair<int32_t, int32_t>> cases = {{40, 0},  {20, 1},   {20, 5},    {47, 16},
                                                          {47, 17}, {100, 37}, {161, 146}, {161, 161}};
  int checked = 0;
  for (int kind = 0; kind < 3; ++kind)
    for (int64_t D : {16, 48, 64, 128, 256})
      for (auto [position, first] : cases) {
        if (!runs(kind, D)) continue;
        const uint32_t seed = uint32_t(100 * kind + D + position + 7 * first);
        const auto k = randn(size_t(kNB * kB * kHkv * D), seed), v = randn(size_t(kNB * kB * kHkv * D), seed + 1);
        const auto q = randn(size_t(D), seed + 2, 2.0f);
        // other values at keys [start, first) (masked), NaN before start (f32: never read)
        const int32_t start = kernels::attention_window_start(first);
        auto k2 = k, v2 = v;
        const auto noise = randn(size_t(D), seed + 3, 5.0f);
        for (int32_t j = 0; j < first; ++j)
          for (int64_t kvh = 0; kvh < kHkv; ++kvh)
            for (int64_t d = 0; d < D; ++d) {
              const bool unread = kind == 0 && j < start;
              k2[size_t(row_of(j, kvh, D) + d)] = unread ? NAN : noise[size_t(d)];
              v2[size_t(row_of(j, kvh, D) + d)] = unread ? NAN : -noise[size_t(d)];
            }
        for (int64_t kvh = 0; kvh < kHkv; ++kvh) {
          INFO("kind " << kind << " D " << D << " position " << position << " first " << first << " kvh " << kvh);
          const auto out = one_query(kind, k, v, D, q.data(), position, first, kvh);
          CHECK(same_bits(out, one_query(kind, k2, v2, D, q.data(), position, first, kvh)));
          if (kind == 0) {  // f32: against double (the quantized caches' kernels equal it over their rows)
            std::vector<double> s;
            double m = -1e300, den = 0;
            for (int32_t j = first; j <= position; ++j) {
              double dot = 0;
              for (int64_t d = 0; d < D; ++d) dot += double(q[size_t(d)]) * k[size_t(row_of(j, kvh, D) + d)];
              s.push_back(dot * kScale), m = std::max(m, s.back());
            }
            for (double& x : s) den += x = std::exp(x - m);
            int bad = 0;
            for (int64_t d = 0; d < D; ++d) {
              double want = 0;
              for (int32_t j = first; j <= position; ++j)
                want += s[size_t(j - first)] / den * v[size_t(row_of(j, kvh, D) + d)];
              bad += !(std::fabs(out[size_t(d)] - want) <= 1e-5 * (1 + std::fabs(want)));
            }
            CHECK(bad == 0);
            // the SIMD kernel (where one runs) against the portable one, keys counted from start
            kernels::PagedKvView view{k.data(), v.data(), kB, kHkv, D};
            view.first_key = start;
            std::vector<float> sp(size_t(kernels::paged_attention_scratch(position)), NAN), op(size_t(D), NAN);
            kernels::detail::paged_attention_head_portable(q.data(), view, kTable.data(), position - start, kvh, kScale,
                                                           sp.data(), op.data(), 0.0f, first - start);
            CHECK(same_bits(out, op));
            // soft-capped: masked after the cap
            const auto capped = one_query(0, k, v, D, q.data(), position, first, kvh, 3.0f);
            CHECK(same_bits(capped, one_query(0, k2, v2, D, q.data(), position, first, kvh, 3.0f)));
            if (position > first) CHECK(!same_bits(capped, out));  // one key: its probability is 1 either way
          }
          if (kind > 0) {
            // int8 / fp8 in place: the f32 kernel over the dequantized rows (soft-capped too)
            const QuantizedKv cache(kind, k, v, D);
            std::vector<float> kd(k.size()), vd(v.size());
            for (size_t r = 0; r < k.size() / size_t(D); ++r) {
              const size_t o = r * size_t(D);
              if (kind == 1) {
                kernels::dequantize_kv_row_int8(reinterpret_cast<const int8_t*>(&cache.kc[o]), D, &cache.ks[2 * r],
                                                &kd[o]);
                kernels::dequantize_kv_row_int8(reinterpret_cast<const int8_t*>(&cache.vc[o]), D, &cache.vs[2 * r],
                                                &vd[o]);
              } else {
                kernels::dequantize_kv_row_fp8(&cache.kc[o], D, cache.ks[0], &kd[o]);
                kernels::dequantize_kv_row_fp8(&cache.vc[o], D, cache.vs[0], &vd[o]);
              }
            }
            CHECK(same_bits(out, one_query(0, kd, vd, D, q.data(), position, first, kvh)));
            CHECK(same_bits(one_query(kind, k, v, D, q.data(), position, first, kvh, 3.0f),
                            one_query(0, kd, vd, D, q.data(), position, first, kvh, 3.0f)));
            if (kind == 2 && kernels::paged_attention_quant_in_place(kernels::KvQuant::Fp8, D, true)) {
              // with its open block's exact rows: those replace the block's dequantized ones
              const int32_t from = position / int32_t(kB) * int32_t(kB);
              const kernels::KvExactRows ex{&k[size_t(row_of(from, kvh, D))], &v[size_t(row_of(from, kvh, D))], from,
                                            kHkv * D};
              std::vector<float> s1(size_t(kernels::paged_attention_scratch(position)), NAN), got(size_t(D), NAN);
              kernels::paged_attention_head_quant(q.data(), cache.view(kB, kHkv, D), kTable.data(), position, kvh,
                                                  kScale, s1.data(), got.data(), &ex, first);
              for (int32_t j = from; j <= position; ++j)
                for (int64_t d = 0; d < D; ++d) {
                  kd[size_t(row_of(j, kvh, D) + d)] = k[size_t(row_of(j, kvh, D) + d)];
                  vd[size_t(row_of(j, kvh, D) + d)] = v[size_t(row_of(j, kvh, D) + d)];
                }
              CHECK(same_bits(got, one_query(0, kd, vd, D, q.data(), position, first, kvh)));
            }
          }
          ++checked;
        }
      }
  CHECK(checked >= 5 * 8 * 2);
  const std::vector<float> z(size_t(kNB * kB * kHkv * 64), 0.5f);
  std::vector<float> s(64), o(64);
  const kernels::PagedKvView view{z.data(), z.data(), kB, kHkv, 64};
  CHECK_THROWS_AS(kernels::paged_attention_head(z.data(), view, kTable.data(), 10, 0, 1.0f, s.data(), o.data(), 11),
                  KernelError);
  CHECK_THROWS_AS(kernels::paged_attention_head(z.data(), view, kTable.data(), 10, 0, 1.0f, s.data(), o.data(), -1),
                  KernelError);
}

TEST_CASE("sliding-window tiles and decode stages equal single queries, bit for bit") {
  if (!kernels::paged_attention_split_runs(64)) LLMCTL_SKIP("no SIMD attention kernel on this CPU");
  int checked = 0;
  for (int run = 0; run < 6; ++run)  // f32, int8, fp8; each soft-capped
    for (int64_t D : {16, 64, 128, 256})
      for (int32_t window : {5, 16, 33, 100}) {
        const int kind = run % 3;
        const float softcap = run >= 3 ? 3.0f : 0.0f;
        if (!runs(kind, D) || !kernels::paged_attention_split_runs(D)) continue;
        const uint32_t seed = uint32_t(1000 * run + D + window);
        const auto k = randn(size_t(kNB * kB * kHkv * D), seed), v = randn(size_t(kNB * kB * kHkv * D), seed + 1);
        const QuantizedKv qkv(kind, k, v, D);
        const kernels::PagedKvView f32{k.data(), v.data(), kB, kHkv, D};
        const kernels::PagedKvQuantView quant = qkv.view(kB, kHkv, D);
        // tiles of four consecutive tokens: before the window's end, across it, far past it
        const std::vector<int32_t> starts = {2, window - 2, 60, 150, 171};
        const int tiles = int(starts.size()), queries = 4 * tiles;
        std::vector<int32_t> pos, first;
        for (int32_t p : starts)
          for (int32_t i = 0; i < 4; ++i)
            pos.push_back(std::max(0, p) + i), first.push_back(std::max(0, pos.back() - window + 1));
        const auto qs = randn(size_t(queries * D), seed + 2, 2.0f);
        for (int64_t kvh = 0; kvh < kHkv; ++kvh) {
          const size_t nq = size_t(queries);
          std::vector<std::vector<float>> st(nq), ot(nq, std::vector<float>(size_t(D), NAN));
          std::vector<const float*> q(nq);
          std::vector<float*> sp(nq), op(nq);
          for (int i = 0; i < queries; ++i) {
            st[size_t(i)].assign(size_t(kernels::paged_attention_scratch(pos[size_t(i)])), NAN);
            q[size_t(i)] = qs.data() + i * D;
            sp[size_t(i)] = st[size_t(i)].data(), op[size_t(i)] = ot[size_t(i)].data();
          }
          REQUIRE((kind == 0 ? kernels::paged_attention_tiles(tiles, q.data(), pos.data(), f32, kTable.data(), kvh,
                                                              kScale, sp.data(), op.data(), softcap, first.data())
                             : kernels::paged_attention_tiles_quant(tiles, q.data(), pos.data(), quant, kTable.data(),
                                                                    kvh, kScale, sp.data(), op.data(), nullptr,
                                                                    first.data(), softcap)));
          for (int i = 0; i < queries; ++i) {
            INFO("run " << run << " D " << D << " window " << window << " query " << i << " position "
                        << pos[size_t(i)] << " first " << first[size_t(i)]);
            const auto want = one_query(kind, k, v, D, q[size_t(i)], pos[size_t(i)], first[size_t(i)], kvh, softcap);
            CHECK(same_bits(ot[size_t(i)], want));
            ++checked;
          }
          // the decode stages for the last token, a GQA group of two queries on this kv head
          const int32_t position = pos.back(), f = first.back(), start = kernels::attention_window_start(f);
          std::vector<float> s0(size_t(kernels::paged_attention_scratch(position)), NAN), s1 = s0;
          std::vector<float> o0(size_t(D), NAN), o1 = o0;
          const float* gq[2] = {q[size_t(queries - 1)], q[0]};
          float* gs[2] = {s0.data(), s1.data()};
          float* go[2] = {o0.data(), o1.data()};
          kernels::SplitAttentionQueries sq{gq, gs, go, 2, position, kvh};
          sq.first = f;
          for (int32_t j0 = start; j0 <= position; j0 += 32) {
            const int32_t j1 = std::min(position + 1, j0 + 32);
            if (kind == 0)
              kernels::paged_attention_split_scores(sq, f32, kTable.data(), kScale, j0, j1);
            else
              kernels::paged_attention_split_scores(sq, quant, kTable.data(), kScale, j0, j1);
          }
          for (float* s : gs) kernels::paged_attention_split_softmax(s, position, f, softcap);
          const int64_t unit = kernels::paged_attention_split_columns();
          for (int64_t d0 = 0; d0 < D; d0 += unit)
            if (kind == 0)
              kernels::paged_attention_split_values(sq, f32, kTable.data(), d0, unit);
            else
              kernels::paged_attention_split_values(sq, quant, kTable.data(), d0, unit);
          CHECK(same_bits(o0, one_query(kind, k, v, D, gq[0], position, f, kvh, softcap)));
          CHECK(same_bits(o1, one_query(kind, k, v, D, gq[1], position, f, kvh, softcap)));
        }
      }
  CHECK(checked > 0);
}
