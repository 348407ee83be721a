// Speculative decoding in the Engine (EngineConfig::proposer) on the tiny random model, on the CPU:
// outputs with drafts equal outputs without, token for token (and logprob for logprob), for greedy
// and seeded sampling, n > 1 / best_of, penalties, stop tokens and strings, max_tokens inside a
// draft run and preemption; the scheduler's invariants hold after every step and every block comes
// back. A random model rarely repeats itself, so most cases use a proposer that replays what a run
// without drafts produced, with some drafts corrupted: both accepts and rejects happen.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <string>

#include "engine/core/hash.h"
#include "engine/sample/sequence_state.h"
#include "engine/spec/ngram_proposer.h"
#include "engine_test_util.h"
#include "replay_proposer.h"

using namespace llmctl;
using namespace llmctl::test;

namespace {

SamplingParams greedy(int max_tokens) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

SamplingParams seeded(uint64_t seed, int max_tokens) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 40;
  p.seed = seed;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

struct Job {
  std::vector<int> prompt;
  SamplingParams params;
};

struct Run {
  std::vector<RequestResult> results;
  EngineStats stats;
};

// All jobs submitted at once, stepped to the end with the scheduler's invariants checked after every
// step; every KV block must be back at the end.
Run run_all(TinyModel& m, const std::vector<Job>& jobs, EngineConfig cfg) {
  auto engine = make_engine(m, cfg);
  std::vector<int64_t> ids;
  for (const Job& j : jobs) ids.push_back(engine->submit(j.prompt, j.params));
  int steps = 0;
  while (engine->has_unfinished()) {
    REQUIRE(engine->step());
    engine->scheduler().check_invariants();
    REQUIRE(++steps < 10000);
  }
  CHECK(engine->scheduler().kv().stats().used_blocks == 0);
  Run run;
  for (int64_t id : ids) {
    auto r = engine->take_result(id);
    REQUIRE(r.has_value());
    REQUIRE(r->error.empty());
    run.results.push_back(std::move(*r));
  }
  run.stats = engine->stats();
  return run;
}

// prompt + output of every sequence of every result: what the replay proposer proposes from.
std::vector<std::vector<int32_t>> references(const std::vector<Job>& jobs, const Run& run) {
  std::vector<std::vector<int32_t>> refs;
  for (size_t i = 0; i < jobs.size(); ++i)
    for (const SequenceOutput& o : run.results[i].outputs) {
      std::vector<int32_t> r(jobs[i].prompt.begin(), jobs[i].prompt.end());
      r.insert(r.end(), o.token_ids.begin(), o.token_ids.end());
      refs.push_back(std::move(r));
    }
  return refs;
}

void check_same(const Run& got, const Run& want) {
  REQUIRE(got.results.size() == want.results.size());
  for (size_t i = 0; i < got.results.size(); ++i) {
    const RequestResult &g = got.results[i], &w = want.results[i];
    REQUIRE(g.outputs.size() == w.outputs.size());
    for (size_t k = 0; k < g.outputs.size(); ++k) {
      INFO("request " << i << ", sequence " << k);
      const SequenceOutput &a = g.outputs[k], &b = w.outputs[k];
      CHECK(a.token_ids == b.token_ids);
      CHECK(a.text == b.text);
      CHECK(a.finish_reason == b.finish_reason);
      CHECK(a.cumulative_logprob == b.cumulative_logprob);
      REQUIRE(a.logprobs.size() == b.logprobs.size());
      for (size_t t = 0; t < a.logprobs.size(); ++t) {
        CHECK(a.logprobs[t].token == b.logprobs[t].token);
        CHECK(a.logprobs[t].logprob == b.logprobs[t].logprob);
        CHECK(a.logprobs[t].rank == b.logprobs[t].rank);
        REQUIRE(a.logprobs[t].top.size() == b.logprobs[t].top.size());
        for (size_t j = 0; j < a.logprobs[t].top.size(); ++j) {
          CHECK(a.logprobs[t].top[j].id == b.logprobs[t].top[j].id);
          CHECK(a.logprobs[t].top[j].logprob == b.logprobs[t].top[j].logprob);
        }
      }
    }
  }
}

EngineConfig with_proposer(std::shared_ptr<const Proposer> p, int k, int num_blocks = 64) {
  EngineConfig c = tiny_engine_options(num_blocks);
  c.proposer = std::move(p);
  c.num_speculative_tokens = k;
  return c;
}

// Runs the jobs without drafts, then with the replay proposer (k drafts, one in corrupt_one_in
// corrupted), checks the outputs are the same and returns the speculative run.
Run check_replay(TinyModel& m, const std::vector<Job>& jobs, int k, int corrupt_one_in, int num_blocks = 64) {
  const Run plain = run_all(m, jobs, tiny_engine_options(num_blocks));
  CHECK(plain.stats.draft_tokens == 0);
  auto proposer = std::make_shared<ReplayProposer>(references(jobs, plain), corrupt_one_in);
  const Run spec = run_all(m, jobs, with_proposer(proposer, k, num_blocks));
  check_same(spec, plain);
  CHECK(proposer->calls() > 0);
  MESSAGE("k " << k << ", corrupt 1 in " << corrupt_one_in << ": " << spec.stats.accepted_draft_tokens << " of "
               << spec.stats.draft_tokens << " drafts accepted; " << spec.stats.steps << " steps (without: "
               << plain.stats.steps << ")");
  CHECK(spec.stats.generated_tokens == plain.stats.generated_tokens);
  return spec;
}

}  // namespace

TEST_CASE("speculative: greedy and seeded sampling give the outputs of a run without drafts") {
  TinyModel m;
  std::vector<Job> jobs;
  for (int i = 0; i < 3; ++i) jobs.push_back({prompt_of(9 + 5 * i, i), greedy(30 + i)});
  for (int i = 0; i < 3; ++i) jobs.push_back({prompt_of(12 + 3 * i, 10 + i), seeded(100 + uint64_t(i), 28 + i)});
  jobs[1].params.logprobs = 3;  // host draws with logprobs
  jobs[4].params.logprobs = 2;
  jobs[5].params.temperature = 1.7f;
  jobs[5].params.top_k = 0;
  jobs[5].params.top_p = 0.9f;
  SUBCASE("every draft right: all accepted, k + 1 tokens a step") {
    const Run spec = check_replay(m, jobs, 4, 0);
    CHECK(spec.stats.draft_tokens > 0);
    CHECK(spec.stats.accepted_draft_tokens == spec.stats.draft_tokens);
  }
  SUBCASE("one draft in three wrong: accepts and rejects") {
    const Run spec = check_replay(m, jobs, 4, 3);
    CHECK(spec.stats.accepted_draft_tokens > 0);
    CHECK(spec.stats.accepted_draft_tokens < spec.stats.draft_tokens);
  }
  SUBCASE("every draft wrong: none accepted, the correction is the token") {
    const Run spec = check_replay(m, jobs, 3, 1);
    CHECK(spec.stats.draft_tokens > 0);
    CHECK(spec.stats.accepted_draft_tokens == 0);
  }
  SUBCASE("one draft a step") { check_replay(m, jobs, 1, 2); }
}

TEST_CASE("speculative: n > 1 and best_of, penalties and min_tokens") {
  TinyModel m;
  std::vector<Job> jobs;
  SamplingParams n3 = seeded(7, 20);
  n3.n = 3;  // children get drafts once forked
  jobs.push_back({prompt_of(21, 1), n3});
  SamplingParams best = seeded(8, 16);
  best.n = 2;
  best.best_of = 3;  // ranked by cumulative logprob: host draws
  jobs.push_back({prompt_of(17, 2), best});
  SamplingParams pen = seeded(9, 24);
  pen.presence_penalty = 0.7f;
  pen.frequency_penalty = 0.4f;
  pen.repetition_penalty = 1.3f;  // draws depend on the tokens before them
  jobs.push_back({prompt_of(11, 3), pen});
  SamplingParams mt = greedy(18);
  mt.ignore_eos = false;
  mt.min_tokens = 10;  // the EOS suppression ends inside a draft run
  mt.logit_bias[ByteTokenizer::kImEnd] = 6.0f;
  jobs.push_back({prompt_of(13, 4), mt});
  const Run spec = check_replay(m, jobs, 4, 4);
  CHECK(spec.stats.accepted_draft_tokens > 0);
  CHECK(spec.results[3].outputs[0].token_ids.size() >= 10);
}

TEST_CASE("speculative: max_tokens and the context end inside a draft run") {
  TinyModel m;
  std::vector<Job> jobs;
  for (int mt = 1; mt <= 9; ++mt) jobs.push_back({prompt_of(8 + mt, mt), mt % 2 ? greedy(mt) : seeded(uint64_t(mt), mt)});
  // max_position_embeddings is 256: prompt + max_tokens up to the last position.
  jobs.push_back({prompt_of(240, 5), greedy(16)});
  const Run spec = check_replay(m, jobs, 5, 0);
  for (size_t i = 0; i < jobs.size(); ++i) {
    CHECK(spec.results[i].outputs[0].finish_reason == "length");
    CHECK(int(spec.results[i].outputs[0].token_ids.size()) == jobs[i].params.max_tokens);
  }
  check_replay(m, jobs, 5, 2);
}

TEST_CASE("speculative: a stop token or a stop string inside a draft run ends the sequence there") {
  TinyModel m;
  // Letters a..h favoured so that outputs are text a stop string can be taken from.
  SamplingParams base = seeded(21, 40);
  for (int c = 'a'; c <= 'h'; ++c) base.logit_bias[c] = 6.0f;
  const std::vector<int> prompt = prompt_of(14, 6);
  const Run free = run_all(m, {{prompt, base}}, tiny_engine_options());
  const std::vector<int>& out = free.results[0].outputs[0].token_ids;
  REQUIRE(out.size() == 40);
  // The references run on past the stop: the drafts cross it.
  const std::vector<std::vector<int32_t>> refs = references({{prompt, base}}, free);

  // A stop token: the first token from position 8 on that did not occur before it.
  size_t at = 8;
  while (at < out.size() && std::find(out.begin(), out.begin() + long(at), out[at]) != out.begin() + long(at)) ++at;
  REQUIRE(at < out.size());
  SamplingParams stop_tok = base;
  stop_tok.stop_token_ids = {out[at]};
  // A stop string: two characters at position 12 (first seen there or later).
  SamplingParams stop_str = base;
  const std::string& text = free.results[0].outputs[0].text;
  REQUIRE(text.size() > 20);
  stop_str.stop = {text.substr(12, 2)};

  for (const SamplingParams& p : {stop_tok, stop_str}) {
    const std::vector<Job> jobs{{prompt, p}};
    const Run plain = run_all(m, jobs, tiny_engine_options());
    CHECK(plain.results[0].outputs[0].finish_reason == "stop");
    CHECK(plain.results[0].outputs[0].token_ids.size() < out.size());
    for (int k : {2, 5}) {
      const Run spec = run_all(m, jobs, with_proposer(std::make_shared<ReplayProposer>(refs, 0), k));
      check_same(spec, plain);
      CHECK(spec.stats.accepted_draft_tokens > 0);
    }
  }
  CHECK(stop_tok.stop_token_ids.size() == 1);
  CHECK(size_t(std::count(out.begin(), out.begin() + long(at), out[at])) == 0);
}

TEST_CASE("speculative: preemption drops drafts; outputs unchanged") {
  TinyModel m;
  std::vector<Job> jobs;
  for (int i = 0; i < 6; ++i) jobs.push_back({prompt_of(20 + 3 * i, 20 + i), i % 2 ? greedy(40) : seeded(uint64_t(50 + i), 40)});
  // 6 sequences of up to ~75 tokens in 16 blocks of 16: they cannot all stay.
  const Run spec = check_replay(m, jobs, 4, 3, 16);
  CHECK(spec.stats.preemptions > 0);
}

TEST_CASE("speculative: the n-gram proposer on the engine") {
  TinyModel m;
  std::vector<Job> jobs;
  // A prompt that repeats itself, greedy: a random model's greedy output also tends to loop.
  std::vector<int> rep;
  for (int r = 0; r < 4; ++r)
    for (int c : {'x', 'y', 'z', 'w', 'q'}) rep.push_back(c);
  jobs.push_back({rep, greedy(60)});
  jobs.push_back({prompt_of(30, 8), greedy(60)});
  jobs.push_back({prompt_of(25, 9), seeded(5, 60)});
  const Run plain = run_all(m, jobs, tiny_engine_options());
  const Run spec = run_all(m, jobs, with_proposer(std::make_shared<NgramProposer>(1, 4), 4));
  check_same(spec, plain);
  MESSAGE("ngram: " << spec.stats.accepted_draft_tokens << " of " << spec.stats.draft_tokens << " drafts accepted ("
                    << spec.stats.steps << " steps, " << plain.stats.steps << " without)");
  CHECK(spec.stats.draft_tokens > 0);
  CHECK(spec.stats.accepted_draft_tokens > 0);
}

TEST_CASE("speculative: no proposer or k = 0 changes nothing; a negative k is refused") {
  TinyModel m;
  const std::vector<Job> jobs{{prompt_of(15, 1), greedy(12)}, {prompt_of(19, 2), seeded(3, 12)}};
  const Run plain = run_all(m, jobs, tiny_engine_options());
  const Run k0 = run_all(m, jobs, with_proposer(std::make_shared<NgramProposer>(), 0));
  check_same(k0, plain);
  CHECK(k0.stats.steps == plain.stats.steps);
  CHECK(k0.stats.draft_tokens == 0);
  CHECK_THROWS_AS(make_engine(m, with_proposer(std::make_shared<NgramProposer>(), -1)), InputError);
}
