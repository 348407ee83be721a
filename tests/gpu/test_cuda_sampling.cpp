// Device sampling (CudaBackend::sample) against the host sampler (engine/sample/sampler.h) on random
// logits rows with random parameters: greedy must agree always; a seeded draw may differ only where
// u falls within double rounding of a boundary, so almost never (counted and bounded).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "engine/sample/device_sampling.h"
#include "engine/sample/sampler.h"
#include "gpu_test_util.h"

using namespace llmctl;
using namespace llmctl::gpu_test;

namespace {

struct Case {
  SamplingParams params;
  SequenceState state;
  std::vector<float> row;
};

Case random_case(std::mt19937& rng, int V, int kind) {
  Case c;
  SamplingParams& p = c.params;
  std::uniform_real_distribution<float> u01(0.f, 1.f);
  p.temperature = kind == 0 ? 0.f : 0.3f + 1.5f * u01(rng);
  if (kind % 3 == 1) p.top_k = 1 + int(rng() % 200);
  if (kind % 4 == 2) p.top_p = 0.5f + 0.49f * u01(rng);
  if (kind % 5 == 3) p.min_p = 0.01f + 0.2f * u01(rng);
  if (kind % 6 == 4) {
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.3f;
    p.repetition_penalty = 1.3f;
    p.logit_bias[int(rng() % V)] = 5.f;
    p.logit_bias[int(rng() % V)] = -100.f;
    p.min_tokens = 4;
  }
  std::vector<int> prompt(20 + rng() % 50);
  for (int& t : prompt) t = int(rng() % V);
  const int eos[] = {int(rng() % V)};
  c.state = SequenceState(p, prompt, rng(), 0, eos);
  const int gen = int(rng() % 8);
  for (int i = 0; i < gen; ++i) c.state.append(int(rng() % V), 0.f);
  // Logits like a model's: a few large, a long tail; some exact ties.
  std::normal_distribution<float> n(0.f, 2.5f);
  c.row.resize(size_t(V));
  for (float& x : c.row) x = n(rng);
  for (int i = 0; i < 5; ++i) c.row[rng() % V] = 12.f + float(i % 2);
  for (int i = 0; i < 4; ++i) c.row[rng() % V] = c.row[rng() % V];
  return c;
}

}  // namespace

TEST_CASE("cuda: device sampling equals the host sampler") {
  CudaBackend& be = backend(DType::BF16);
  std::mt19937 rng(42);
  for (int V : {1000, 49152, 128256}) {
    const int R = 64, reps = V > 100000 ? 4 : 8;
    int total = 0, greedy = 0, mismatch = 0, greedy_mismatch = 0;
    for (int rep = 0; rep < reps; ++rep) {
      std::vector<Case> cases;
      Tensor logits = Tensor::empty_host(DType::F32, {R, V});
      for (int r = 0; r < R; ++r) {
        cases.push_back(random_case(rng, V, (rep * R + r) % 30));
        std::copy(cases.back().row.begin(), cases.back().row.end(), logits.ptr<float>() + int64_t(r) * V);
      }
      Tensor dev = be.upload(logits, DType::F32);
      std::vector<SampleJob> jobs;
      for (int r = 0; r < R; ++r) {
        const uint64_t step = uint64_t(cases[r].state.num_generated());
        jobs.push_back(make_sample_job(cases[r].params, cases[r].state, step, r, V));
      }
      // The same row sampled twice by two jobs (n > 1 children share the prompt's row).
      jobs.push_back(jobs[5]);
      const std::vector<int32_t> tokens = be.sample(dev, jobs);
      REQUIRE(tokens.size() == jobs.size());
      CHECK(tokens.back() == tokens[5]);
      for (int r = 0; r < R; ++r) {
        SequenceState st = cases[r].state;
        const int host = sample(cases[r].row.data(), V, cases[r].params, st, uint64_t(cases[r].state.num_generated())).token;
        ++total;
        const bool g = cases[r].params.greedy();
        greedy += g;
        if (host != tokens[r]) {
          ++mismatch;
          greedy_mismatch += g;
          std::printf("  V=%d row %d: host %d device %d (T=%.3f k=%d p=%.3f min_p=%.3f)\n", V, r, host, tokens[r],
                      cases[r].params.temperature, cases[r].params.top_k, cases[r].params.top_p,
                      cases[r].params.min_p);
        }
      }
    }
    std::printf("  device sampling V=%-6d %d draws (%d greedy): %d differ from the host sampler\n", V, total, greedy,
                mismatch);
    CHECK(greedy_mismatch == 0);
    CHECK(mismatch <= total / 200);
  }
}

TEST_CASE("cuda: device sampling draws with the expected frequencies") {
  // One row, many u: the empirical distribution of drawn tokens follows softmax(l / T) over the
  // top-k set (chi-square-like bound on the total variation).
  CudaBackend& be = backend(DType::BF16);
  const int V = 3000, K = 6, N = 4096;
  std::mt19937 rng(5);
  std::normal_distribution<float> n(0.f, 1.f);
  Tensor logits = Tensor::empty_host(DType::F32, {1, V});
  for (int i = 0; i < V; ++i) logits.ptr<float>()[i] = n(rng);
  Tensor dev = be.upload(logits, DType::F32);
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_k = K;
  std::vector<SampleJob> jobs;
  SequenceState st(p, std::vector<int>{1, 2}, 9, 0, std::vector<int>{});
  for (int i = 0; i < N; ++i) jobs.push_back(make_sample_job(p, st, uint64_t(i), 0, V));
  const std::vector<int32_t> tokens = be.sample(dev, jobs);
  std::vector<std::pair<float, int>> top;
  for (int i = 0; i < V; ++i) top.push_back({logits.ptr<float>()[i], i});
  std::partial_sort(top.begin(), top.begin() + K, top.end(), std::greater<>());
  double z = 0;
  for (int i = 0; i < K; ++i) z += std::exp((top[i].first - top[0].first) / 0.7);
  double tv = 0;
  int in_top = 0;
  for (int i = 0; i < K; ++i) {
    const double want = std::exp((top[i].first - top[0].first) / 0.7) / z;
    const double got = double(std::count(tokens.begin(), tokens.end(), top[i].second)) / N;
    in_top += int(std::count(tokens.begin(), tokens.end(), top[i].second));
    tv += std::fabs(want - got) / 2;
  }
  std::printf("  %d draws over the top %d: total variation %.4f\n", N, K, tv);
  CHECK(in_top == N);
  CHECK(tv < 0.03);
}
