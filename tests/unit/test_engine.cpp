// The Engine on a tiny random model (tests/unit/engine_test_util.h), on the CPU: n > 1 and best_of
// forks, aborts (of queued requests, between steps and from a stream callback), prompt
// logprob rows against the Scorer, and the padded vocabulary.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "engine/sample/sequence_state.h"
#include "engine_test_util.h"

using namespace llmctl;
using namespace llmctl::test;

namespace {

SamplingParams sampled(uint64_t seed, int max_tokens) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = seed;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

}  // namespace

TEST_CASE("engine: n > 1 runs the prompt once, children share its blocks and equal solo seeded runs") {
  TinyModel m;
  const std::vector<int> prompt = prompt_of(40);  // blocks of 16: two full, one partial
  SamplingParams p = sampled(1234, 8);
  p.n = 3;
  auto engine = make_engine(m);
  const int64_t id = engine->submit(prompt, p);
  REQUIRE(engine->step());  // the prompt step: one sequence, then three after the fork
  CHECK(engine->stats().prompt_tokens == 40);
  CHECK(engine->scheduler().kv().stats().used_blocks == 3);  // all three read the same 3 blocks
  REQUIRE(engine->step());  // each child writes its token into the partial block: copy-on-write
  const KvCacheStats kv = engine->scheduler().kv().stats();
  CHECK(kv.used_blocks == 2 + 3);  // the full prompt blocks stay shared (unshared: 3 x 3)
  CHECK(kv.cow_copies == 2);
  engine->drain();
  const RequestResult r = *engine->take_result(id);
  CHECK(engine->stats().prompt_tokens == 40);  // still once
  REQUIRE(r.outputs.size() == 3);
  std::set<std::vector<int>> distinct;
  for (int i = 0; i < 3; ++i) {
    SamplingParams solo = sampled(child_seed(1234, i), 8);  // child i draws with child_seed(seed, i)
    const RequestResult s = run_alone(m, prompt, solo);
    INFO("child " << i);
    CHECK(r.outputs[size_t(i)].index == i);
    CHECK(r.outputs[size_t(i)].token_ids == s.outputs[0].token_ids);
    CHECK(r.outputs[size_t(i)].text == s.outputs[0].text);
    CHECK(r.outputs[size_t(i)].finish_reason == "length");
    distinct.insert(r.outputs[size_t(i)].token_ids);
  }
  CHECK(distinct.size() > 1);  // the children did not all draw the same (their seeds differ)
  CHECK(engine->scheduler().kv().stats().used_blocks == 0);
}

TEST_CASE("engine: best_of returns the n best of its sequences by cumulative logprob") {
  TinyModel m;
  const std::vector<int> prompt = prompt_of(21, 3);
  SamplingParams p = sampled(77, 6);
  p.n = 2;
  p.best_of = 4;
  const RequestResult r = run_alone(m, prompt, p);
  REQUIRE(r.error.empty());
  REQUIRE(r.outputs.size() == 2);
  // The four candidates, each run alone with its child seed and scored.
  std::vector<std::pair<double, std::vector<int>>> solos;
  for (int i = 0; i < 4; ++i) {
    SamplingParams solo = sampled(child_seed(77, i), 6);
    solo.logprobs = 0;
    const RequestResult s = run_alone(m, prompt, solo);
    solos.push_back({s.outputs[0].cumulative_logprob, s.outputs[0].token_ids});
  }
  std::sort(solos.begin(), solos.end(), [](auto& a, auto& b) { return a.first > b.first; });
  REQUIRE(solos[1].first > solos[2].first);  // the best two are well defined
  std::multiset<std::vector<int>> got{r.outputs[0].token_ids, r.outputs[1].token_ids},
      want{solos[0].second, solos[1].second};
  CHECK(got == want);
  for (const SequenceOutput& o : r.outputs) {
    CHECK(o.scored);
    const auto it = std::find_if(solos.begin(), solos.end(), [&](auto& s) { return s.second == o.token_ids; });
    REQUIRE(it != solos.end());
    CHECK(o.cumulative_logprob == doctest::Approx(it->first).epsilon(1e-6));
  }
}

TEST_CASE("engine: abort of a queued request from a stream callback while the step runs") {
  // (Aborting a request of the running step from a callback is a known defect: see
  // test_engine_abort_in_step.cpp.)
  TinyModel m;
  EngineConfig cfg = tiny_engine_options();
  cfg.sched.max_num_seqs = 1;  // b waits in the queue while a runs
  auto engine = make_engine(m, cfg);
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 20;
  p.ignore_eos = true;
  int64_t b = 0;
  int a_tokens = 0, b_done = 0;
  bool fired = false;
  std::string b_reason;
  const int64_t a = engine->submit(prompt_of(18, 1), p, [&](const StreamEvent& e) {
    a_tokens += int(e.token_ids.size());
    if (a_tokens >= 3 && !fired) {
      fired = true;
      engine->abort(b);  // from inside a's event, in the middle of the step
    }
  });
  b = engine->submit(prompt_of(25, 2), p, [&](const StreamEvent& e) {
    if (e.done) ++b_done, b_reason = std::string(e.finish_reason);
  });
  engine->drain();
  REQUIRE(fired);
  const RequestResult ra = *engine->take_result(a), rb = *engine->take_result(b);
  CHECK(rb.outputs[0].finish_reason == "abort");
  CHECK(rb.outputs[0].token_ids.empty());
  CHECK(b_done == 1);  // its stream ends once, with "abort"
  CHECK(b_reason == "abort");
  // The request that streamed is untouched: equal to its run alone.
  CHECK(ra.outputs[0].finish_reason == "length");
  CHECK(ra.outputs[0].token_ids == run_alone(m, prompt_of(18, 1), p).outputs[0].token_ids);
  CHECK(engine->scheduler().kv().stats().used_blocks == 0);  // every block came back
  CHECK_FALSE(engine->has_unfinished());
}

TEST_CASE("engine: abort of queued requests") {
  TinyModel m;
  EngineConfig cfg = tiny_engine_options();
  cfg.sched.max_num_seqs = 1;  // one running sequence: the others wait in the queue
  auto engine = make_engine(m, cfg);
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 4;
  p.ignore_eos = true;
  std::vector<int64_t> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(engine->submit(prompt_of(10 + i, i), p));
  REQUIRE(engine->step());
  CHECK(engine->num_running_requests() == 1);
  engine->abort(ids[2]);
  engine->abort(ids[3]);
  for (int64_t id : {ids[2], ids[3]}) {
    const auto r = engine->take_result(id);  // finished at once, never having run
    REQUIRE(r.has_value());
    CHECK(r->outputs[0].finish_reason == "abort");
    CHECK(r->outputs[0].token_ids.empty());
  }
  engine->drain();
  for (int i = 0; i < 2; ++i) {
    const RequestResult r = *engine->take_result(ids[size_t(i)]);
    CHECK(r.outputs[0].finish_reason == "length");
    CHECK(r.outputs[0].token_ids == run_alone(m, prompt_of(10 + i, i), p).outputs[0].token_ids);
  }
  CHECK(engine->scheduler().kv().stats().used_blocks == 0);
}

TEST_CASE("engine: prompt logprob rows equal the Scorer's teacher-forced rows") {
  TinyModel m;
  const std::vector<int> prompt = prompt_of(40, 5);
  // The Scorer's log-softmax rows cover the model's whole (padded) vocabulary; the engine's cover
  // the tokenizer's ids: renormalize over those.
  const auto rows = make_scorer(m)->score(prompt);
  REQUIRE(rows.size() == prompt.size());
  const int V = ByteTokenizer::kVocab;
  auto masked = [&](int p) {  // the reference row for position p (predicted from ids[0..p))
    const std::vector<float>& lp = rows[size_t(p) - 1];
    double mx = -INFINITY, s = 0;
    for (int i = 0; i < V; ++i) mx = std::max(mx, double(lp[size_t(i)]));
    for (int i = 0; i < V; ++i) s += std::exp(double(lp[size_t(i)]) - mx);
    std::vector<double> out(static_cast<size_t>(V));
    for (int i = 0; i < V; ++i) out[size_t(i)] = lp[size_t(i)] - mx - std::log(s);
    return out;
  };
  EngineConfig cfg = tiny_engine_options();
  cfg.sched.max_num_batched_tokens = 16;  // the prompt in three chunks: rows from every chunk
  auto engine = make_engine(m, cfg);
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 1;
  p.prompt_logprobs = 3;
  const int64_t first = engine->submit(prompt, p);
  engine->drain();
  const int64_t second = engine->submit(prompt, p);  // again: no cached prefix may skip rows
  engine->drain();
  for (int64_t id : {first, second}) {
    const RequestResult r = *engine->take_result(id);
    REQUIRE(r.prompt_logprobs.size() == prompt.size());
    CHECK_FALSE(r.prompt_logprobs[0].has_value());  // nothing predicts the first token
    double worst = 0;
    for (int pos = 1; pos < int(prompt.size()); ++pos) {
      INFO("position " << pos);
      REQUIRE(r.prompt_logprobs[size_t(pos)].has_value());
      const TokenLogprobs& got = *r.prompt_logprobs[size_t(pos)];
      const std::vector<double> ref = masked(pos);
      const int tok = prompt[size_t(pos)];
      CHECK(got.token == tok);
      worst = std::max(worst, std::fabs(got.logprob - ref[size_t(tok)]));
      int rank = 1;
      for (int i = 0; i < V; ++i) rank += ref[size_t(i)] > ref[size_t(tok)] || (ref[size_t(i)] == ref[size_t(tok)] && i < tok);
      CHECK(got.rank == rank);
      std::vector<int> order(static_cast<size_t>(V));
      for (int i = 0; i < V; ++i) order[size_t(i)] = i;
      std::partial_sort(order.begin(), order.begin() + 3, order.end(),
                        [&](int x, int y) { return ref[size_t(x)] != ref[size_t(y)] ? ref[size_t(x)] > ref[size_t(y)] : x < y; });
      REQUIRE(got.top.size() == 3);
      for (int k = 0; k < 3; ++k) {
        CHECK(got.top[size_t(k)].id == order[size_t(k)]);
        CHECK(std::fabs(got.top[size_t(k)].logprob - ref[size_t(order[size_t(k)])]) < 1e-5);
      }
    }
    MESSAGE("prompt logprobs vs the Scorer: max |difference| " << worst);
    CHECK(worst < 1e-5);
  }
}

TEST_CASE("engine: the padded vocabulary is never drawn nor listed, whatever the bias") {
  TinyModel m;
  auto engine = make_engine(m);
  REQUIRE(engine->sample_vocab() == ByteTokenizer::kVocab);
  std::vector<int64_t> ids;
  for (float temp : {0.0f, 1.5f}) {
    SamplingParams p = sampled(9, 12);
    p.temperature = temp;
    p.n = temp > 0 ? 4 : 1;
    p.logprobs = 5;
    p.prompt_logprobs = 5;
    for (int pad = ByteTokenizer::kVocab; pad < kTinyModelVocab; ++pad) p.logit_bias[pad] = 100.f;
    ids.push_back(engine->submit(prompt_of(20, 7), p));
  }
  engine->drain();
  int tokens = 0;
  for (int64_t id : ids) {
    const RequestResult r = *engine->take_result(id);
    REQUIRE(r.error.empty());
    for (const SequenceOutput& o : r.outputs) {
      CHECK(o.token_ids.size() == 12);
      for (int t : o.token_ids) CHECK(t < ByteTokenizer::kVocab);
      for (const TokenLogprobs& lp : o.logprobs)
        for (const TopLogprob& t : lp.top) CHECK(t.id < ByteTokenizer::kVocab);
      tokens += int(o.token_ids.size());
    }
    for (const auto& lp : r.prompt_logprobs)
      if (lp)
        for (const TopLogprob& t : lp->top) CHECK(t.id < ByteTokenizer::kVocab);
  }
  CHECK(tokens == 12 + 4 * 12);
}
