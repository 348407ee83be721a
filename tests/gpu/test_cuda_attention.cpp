// Paged attention (decode, split decode, prefill, mixed) through CudaBackend::write_kv + attention,
// against a naive double-precision reference over a table of shapes, block sizes and dtypes.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "gpu_test_util.h"

using namespace llmctl;
using namespace llmctl::gpu_test;

namespace {

struct SeqSpec {
  int before;  // tokens already in the cache
  int fresh;   // new tokens this step
};

struct AttnCase {
  int D, Hkv, G, B;
  DType dt;
};

// Builds a plan whose sequences get randomly placed blocks in a pool with spare blocks.
BatchPlan make_plan(const std::vector<SeqSpec>& seqs, int B, std::mt19937& rng, int* num_blocks) {
  BatchPlan p;
  int total_blocks = 0, max_blocks = 0;
  for (auto s : seqs) {
    const int nb = (s.before + s.fresh + B - 1) / B;
    total_blocks += nb;
    max_blocks = std::max(max_blocks, nb);
  }
  *num_blocks = total_blocks + 5;
  std::vector<int32_t> pool(*num_blocks);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  p.max_blocks_per_seq = max_blocks + 1;  // one -1 pad column
  size_t next = 0;
  for (auto s : seqs) {
    const int ctx = s.before + s.fresh, nb = (ctx + B - 1) / B;
    std::vector<int32_t> row(p.max_blocks_per_seq, -1);
    for (int i = 0; i < nb; ++i) row[i] = pool[next++];
    for (int pos = s.before; pos < ctx; ++pos) {
      p.token_ids.push_back(1);
      p.positions.push_back(pos);
      p.slot_mapping.push_back(row[pos / B] * B + pos % B);
    }
    p.block_table.insert(p.block_table.end(), row.begin(), row.end());
    p.context_len.push_back(ctx);
    p.query_start.push_back(p.query_start.back() + s.fresh);
    if (s.fresh > 0) p.logits_rows.push_back(p.query_start.back() - 1);
  }
  p.validate(B, *num_blocks);
  return p;
}

void run_case(const AttnCase& c, const std::vector<SeqSpec>& seqs, const char* batch_name, uint32_t seed) {
  std::mt19937 rng(seed);
  CudaBackend& be = backend(c.dt);
  const int Hq = c.Hkv * c.G, D = c.D, W = (Hq + 2 * c.Hkv) * D;
  int NB = 0;
  BatchPlan plan = make_plan(seqs, c.B, rng, &NB);
  const int T = plan.num_tokens();
  const float scale = 1.f / std::sqrt(float(D));

  // The cache starts fully random (earlier context and never-read garbage alike); the step's own k/v
  // come from qkv through write_kv.
  HostData kc = random_host(c.dt, {NB, c.B, c.Hkv, D}, rng), vc = random_host(c.dt, {NB, c.B, c.Hkv, D}, rng);
  HostData qkv = random_host(c.dt, {T, W}, rng);
  KvLayer cache{be.upload(kc.t, c.dt), be.upload(vc.t, c.dt)};
  Tensor dqkv = be.upload(qkv.t, c.dt);
  DeviceBatch b = be.prepare_batch(plan);
  be.write_kv(dqkv, b, Hq, c.Hkv, cache);
  Tensor out = poisoned(be, c.dt, {T, Hq * D});
  be.attention(dqkv, cache, b, Hq, c.Hkv, scale, out);
  std::vector<float> got = to_vec(be, out);

  // Reference cache = initial cache with the new tokens' k/v written.
  std::vector<float> K = kc.f, V = vc.f;
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < c.Hkv; ++h)
      for (int d = 0; d < D; ++d) {
        const size_t dst = (size_t(plan.slot_mapping[t]) * c.Hkv + h) * D + d;
        K[dst] = qkv.f[size_t(t) * W + (Hq + h) * D + d];
        V[dst] = qkv.f[size_t(t) * W + (Hq + c.Hkv + h) * D + d];
      }
  std::vector<double> ref(size_t(T) * Hq * D);
  std::vector<double> sc, acc(D);
  for (int s = 0; s < plan.num_seqs(); ++s) {
    const int32_t* bt = &plan.block_table[size_t(s) * plan.max_blocks_per_seq];
    for (int t = plan.query_start[s]; t < plan.query_start[s + 1]; ++t) {
      const int n = plan.positions[t] + 1;
      sc.resize(n);
      for (int h = 0; h < Hq; ++h) {
        const int kvh = h / c.G;
        const float* q = &qkv.f[size_t(t) * W + size_t(h) * D];
        double m = -INFINITY;
        for (int j = 0; j < n; ++j) {
          const float* k = &K[(size_t(bt[j / c.B]) * c.B + j % c.B) * c.Hkv * D + size_t(kvh) * D];
          double dot = 0;
          for (int d = 0; d < D; ++d) dot += double(q[d]) * k[d];
          sc[j] = dot * scale;
          m = std::max(m, sc[j]);
        }
        double l = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int j = 0; j < n; ++j) {
          const double pj = std::exp(sc[j] - m);
          l += pj;
          const float* v = &V[(size_t(bt[j / c.B]) * c.B + j % c.B) * c.Hkv * D + size_t(kvh) * D];
          for (int d = 0; d < D; ++d) acc[d] += pj * v[d];
        }
        for (int d = 0; d < D; ++d) ref[(size_t(t) * Hq + h) * D + d] = acc[d] / l;
      }
    }
  }
  char name[160];
  std::snprintf(name, sizeof name, "attention %-8s D=%-3d Hkv=%d G=%-2d B=%-2d T=%d", batch_name, D, c.Hkv, c.G, c.B, T);
  expect_close(name, c.dt, got, ref);
}

// Sequences: decodes at context 1, 17, 100, 1000, 4133; prefill from scratch; chunks whose earlier
// context is already in the cache (60 + 40, 900 + 100).
const std::vector<SeqSpec> kMixed = {{0, 17}, {16, 1}, {99, 1}, {999, 1}, {4132, 1}, {60, 40}, {900, 100}};
const std::vector<SeqSpec> kDecode = {{0, 1}, {16, 1}, {99, 1}, {999, 1}, {4132, 1}};
const std::vector<SeqSpec> kPrefill = {{0, 100}, {33, 67}, {0, 2}};

std::vector<SeqSpec> many_short_decodes() {  // enough blocks that contexts are not split
  std::vector<SeqSpec> v;
  for (int i = 0; i < 48; ++i) v.push_back({(i * 37) % 100, 1});
  return v;
}

}  // namespace

TEST_CASE("cuda: paged attention over the shape table") {
  uint32_t seed = 100;
  for (DType dt : kHalfTypes)
    for (int D : {64, 128})
      for (int G : {1, 3, 4, 8})
        for (int B : {16, 32}) {
          const AttnCase c{D, 2, G, B, dt};
          run_case(c, kMixed, "mixed", seed++);
          run_case(c, kDecode, "decode", seed++);
          run_case(c, kPrefill, "prefill", seed++);
        }
}

TEST_CASE("cuda: attention, unsplit decode batch and wide GQA groups") {
  for (DType dt : kHalfTypes) {
    run_case({128, 2, 4, 16, dt}, many_short_decodes(), "short", 7);
    run_case({64, 1, 12, 16, dt}, kMixed, "G=12", 8);          // more q heads per kv head than one block takes
    run_case({128, 8, 4, 16, dt}, {{0, 1}, {4132, 1}, {50, 30}, {0, 70}}, "llama3", 9);  // Llama-3-8B heads
    // Batch 1 at context 1024 (the decode benchmark's case: 32-key partitions merged by the last
    // block), three launches in a row: the split counters must be back at zero after each.
    for (int rep = 0; rep < 3; ++rep) run_case({128, 8, 4, 16, dt}, {{1023, 1}}, "b1-1024", 10 + rep);
  }
}
