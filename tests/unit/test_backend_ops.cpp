// The backend parity table (tests/backend_ops/) on the CPU backend against the naive references.
// The same table runs on the CUDA backend in tests/gpu/test_backend_ops.cpp.
#include <doctest/doctest.h>

#include <random>

#include "../backend_ops/backend_ops_table.h"
#include "engine/sample/device_sampling.h"
#include "engine/sample/sampler.h"

using namespace llmctl;

TEST_CASE("backend parity table: the CPU backend against the naive references") {
  for (int threads : {1, 3}) {  // one thread and a row split across threads
    auto be = make_cpu_backend(threads);
    backend_ops::Target target{be.get(), {DType::F32, DType::BF16, DType::F16}};
    const auto counts = backend_ops::run_table(target);
    CHECK(counts.count("sample") == 1);  // the CPU's Backend::sample (the reference) joins the table
  }
}

// The table's sample reference against the host sampler (engine/sample/sampler.h), the semantics
// every backend's Backend::sample must follow, on jobs built by make_sample_job from random
// parameters and states.
TEST_CASE("backend parity table: the sample row's reference draws what the host sampler draws") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u01(0.f, 1.f);
  std::normal_distribution<float> n(0.f, 2.5f);
  int compared = 0, near_boundary = 0, greedy = 0;
  for (int V : {300, 5000}) {
    for (int kind = 0; kind < 120; ++kind) {
      SamplingParams p;
      p.temperature = kind % 4 == 0 ? 0.f : 0.3f + 1.5f * u01(rng);
      if (kind % 3 == 1) p.top_k = 1 + int(rng() % 100);
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
      std::vector<int> prompt(10 + rng() % 30);
      for (int& t : prompt) t = int(rng() % V);
      const int eos[] = {int(rng() % V)};
      SequenceState st(p, prompt, rng(), 0, eos);
      for (int i = 0, gen = int(rng() % 6); i < gen; ++i) st.append(int(rng() % V), 0.f);
      std::vector<float> row(static_cast<size_t>(V));
      for (float& x : row) x = n(rng);
      for (int i = 0; i < 5; ++i) row[rng() % V] = 9.f + float(i);
      const int vocab = kind % 2 ? V - 17 : V;  // every other row padded
      const uint64_t step = uint64_t(st.num_generated());
      const SampleJob job = make_sample_job(p, st, step, 0, vocab);
      const backend_ops::SampleDraw want = backend_ops::sample_reference(row, job);
      const int got = sample(row.data(), vocab, p, st, step).token;
      ++compared;
      greedy += p.temperature == 0;
      if (got == want.token) continue;
      if (p.temperature > 0 && want.margin < 1e-4) {
        ++near_boundary;
        continue;
      }
      FAIL_CHECK("V=" << V << " case " << kind << ": host sampler " << got << ", reference " << want.token
                      << " (margin " << want.margin << ")");
    }
  }
  MESSAGE(compared << " draws compared (" << greedy << " greedy), " << near_boundary << " within 1e-4 of a boundary");
  CHECK(near_boundary <= 2);
}
