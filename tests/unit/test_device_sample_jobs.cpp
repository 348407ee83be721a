// make_sample_job: the sparse per-id edits a device sampling job carries reproduce logits
// processing stages 1-4 (engine/sample/logits_processors.h) bit for bit when applied in the
// documented order, and the draw u is the host sampler's; the CPU backend's Backend::sample (the
// reference) draws from each job the token the host sampler draws for its sequence.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "engine/backend/backend.h"
#include "engine/sample/device_sampling.h"
#include "engine/sample/logits_processors.h"
#include "engine/sample/sampler.h"

using namespace llmctl;

namespace {
// What kernels/cuda/sampling.cu does with a job's edits.
void apply_edits(std::vector<float>& row, const SampleJob& job) {
  for (const LogitEdit& e : job.edits) {
    float l = row[size_t(e.id)];
    if (e.flags & LogitEdit::kBias) l = l + e.bias;
    if (e.flags & LogitEdit::kSuppress) l = -std::numeric_limits<float>::infinity();
    if (e.flags & LogitEdit::kSubtract) l = l - e.sub;
    if (e.flags & LogitEdit::kRepeat) l = l > 0 ? l / job.repetition_penalty : l * job.repetition_penalty;
    row[size_t(e.id)] = l;
  }
}
}  // namespace

TEST_CASE("device sampling jobs: edits equal logits processing stages 1-4") {
  std::mt19937 rng(17);
  const int V = 500;
  std::normal_distribution<float> n(0.f, 3.f);
  for (int c = 0; c < 300; ++c) {
    SamplingParams p;
    p.temperature = c % 5 == 0 ? 0.f : 0.8f;
    if (c % 2) {
      p.presence_penalty = 0.4f;
      p.frequency_penalty = 0.25f;
    }
    if (c % 3) p.repetition_penalty = 1.2f + 0.1f * float(c % 4);
    if (c % 4 == 1) p.min_tokens = 5;
    for (int i = 0; i < c % 6; ++i) p.logit_bias[int(rng() % V)] = float(int(rng() % 200) - 100) / 3.f;
    if (c % 7 == 2) p.stop_token_ids = {int(rng() % V), int(rng() % V)};
    std::vector<int> prompt(1 + rng() % 40);
    for (int& t : prompt) t = int(rng() % V);
    const int eos[] = {int(rng() % V)};
    SequenceState st(p, prompt, rng(), c % 3, eos);
    for (int i = 0, g = int(rng() % 10); i < g; ++i) st.append(int(rng() % V), 0.f);

    std::vector<float> row(V);
    for (float& x : row) x = n(rng);
    std::vector<float> host = row, dev = row;
    process_logits(host.data(), V, p, st);
    const SampleJob job = make_sample_job(p, st, uint64_t(st.num_generated()), 3, V);
    apply_edits(dev, job);
    CHECK(std::memcmp(host.data(), dev.data(), sizeof(float) * V) == 0);
    CHECK(job.row == 3);
    CHECK(job.temperature == (p.greedy() ? 0.f : p.temperature));
    if (!p.greedy()) CHECK(job.u == counter_uniform(st.seed, uint64_t(st.num_generated())));
    for (size_t i = 1; i < job.edits.size(); ++i) CHECK(job.edits[i - 1].id < job.edits[i].id);  // one edit per id
  }
}

TEST_CASE("the CPU backend's sample() draws the host sampler's token from each sequence's job") {
  std::mt19937 rng(23);
  const int V = 300, W = 320;  // rows wider than the drawable ids (a padded vocabulary)
  std::normal_distribution<float> n(0.f, 2.5f);
  auto be = make_cpu_backend(1);
  std::vector<SamplingParams> params;
  std::vector<SequenceState> states;
  for (int c = 0; c < 200; ++c) {
    SamplingParams p;
    p.temperature = c % 6 == 0 ? 0.f : 0.5f + 0.25f * float(c % 5);
    if (c % 3 == 1) p.top_k = 1 + c % 40;
    if (c % 4 == 2) p.top_p = 0.7f + 0.05f * float(c % 5);
    if (c % 5 == 3) p.min_p = 0.05f;
    if (c % 2) p.presence_penalty = 0.3f, p.frequency_penalty = 0.2f;
    if (c % 7 == 1) p.repetition_penalty = 1.3f;
    if (c % 8 == 3) p.min_tokens = 50;  // its stop ids suppressed
    for (int i = 0; i < c % 4; ++i) p.logit_bias[int(rng() % V)] = float(int(rng() % 60) - 30) / 3.f;
    std::vector<int> prompt(1 + rng() % 30);
    for (int& t : prompt) t = int(rng() % V);
    const int eos[] = {int(rng() % V)};
    SequenceState st(p, prompt, rng(), c % 3, eos);
    for (int i = 0, g = int(rng() % 8); i < g; ++i) st.append(int(rng() % V), 0.f);
    params.push_back(p);
    states.push_back(std::move(st));
  }
  const int R = int(params.size());
  Tensor logits = Tensor::empty_host(DType::F32, {R, W});
  for (int64_t i = 0; i < logits.numel(); ++i) logits.ptr<float>()[i] = n(rng);
  std::vector<SampleJob> jobs;
  for (int r = 0; r < R; ++r)
    jobs.push_back(make_sample_job(params[size_t(r)], states[size_t(r)], uint64_t(states[size_t(r)].num_generated()), r, V));
  REQUIRE(be->caps().sampling);
  const std::vector<int32_t> got = be->sample(logits, jobs);
  REQUIRE(got.size() == jobs.size());
  int greedy = 0;
  for (int r = 0; r < R; ++r) {
    SequenceState st = states[size_t(r)];
    const SampleResult want = sample(logits.ptr<float>() + int64_t(r) * W, V, params[size_t(r)], st, uint64_t(st.num_generated()));
    CHECK(got[size_t(r)] == want.token);
    greedy += params[size_t(r)].greedy();
  }
  CHECK(greedy > 10);
}

TEST_CASE("device sampling: only sequences that need no logprobs are drawn on the device") {
  SamplingParams p;
  CHECK(device_samplable(p));
  p.logprobs = 0;
  CHECK_FALSE(device_samplable(p));
  SamplingParams q;
  q.n = 2;
  q.best_of = 3;  // ranked by cumulative logprob
  CHECK_FALSE(device_samplable(q));
  q.best_of = 2;
  CHECK(device_samplable(q));
}
