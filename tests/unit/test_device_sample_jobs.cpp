// make_sample_job: the sparse per-id edits a device sampling job carries reproduce logits
// processing stages 1-4 (engine/sample/logits_processors.h) bit for bit when applied in the
// documented order, and the draw u is the host sampler's.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

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
