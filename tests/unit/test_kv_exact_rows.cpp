// Exact open-block rows beside an fp8 KV cache (engine/backend/kv_exact_rows.h) on the CPU: the
// manager's slots (assigned, freed, copied on fork; a cached prompt restarts at a block boundary),
// and the engine on tiny random models whose attention takes the in-place kernel (head_dim 32 on
// AVX-512) or the dequantized copy (head_dim 8): the rule "a query reads its own block exact" depends
// on positions only, so outputs are the same bits alone, batched, chunked anywhere, speculated (with
// rollbacks across block boundaries), forked and served from the prefix cache, and equal to the
// teacher-forced scores of one sequence. Within the first block every key is exact: the f32 cache's
// bits.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <deque>
#include <memory>

#include "engine/kv/kv_cache_manager.h"
#include "engine/spec/ngram_proposer.h"
#include "engine_test_util.h"
#include "replay_proposer.h"

using namespace llmctl;
using namespace llmctl::test;

TEST_CASE("KvCacheManager exact slots: lowest free, held until free, copied on fork, whole cached prompts give up a block") {
  KvCacheManager kv(32, 4, true, true);
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8}, b = {9, 9, 9};
  REQUIRE(kv.allocate_prompt(1, a));
  REQUIRE(kv.allocate_prompt(2, b));
  CHECK(kv.exact_slot(1) == 0);
  CHECK(kv.exact_slot(2) == 1);
  kv.commit_tokens(1, a, 8);  // two full blocks, hashed
  kv.fork(1, 3);
  CHECK(kv.exact_slot(3) == 2);
  CHECK(kv.take_pending_exact_copies() == std::vector<int32_t>{0, 2});
  CHECK(kv.take_pending_exact_copies().empty());
  kv.free(2);
  REQUIRE(kv.allocate_prompt(4, {7, 7}));
  CHECK(kv.exact_slot(4) == 1);  // the lowest free slot again
  kv.check_invariants();
  // The whole of `a` is cached: without exact slots the last token is computed again (7 cached);
  // with them the last block is (4 cached), so the sequence starts at a block boundary.
  CHECK(kv.peek_cached_tokens(a) == 4);
  REQUIRE(kv.allocate_prompt(5, a) == 4);
  std::vector<int32_t> longer = a;
  longer.push_back(10);
  CHECK(kv.peek_cached_tokens(longer) == 8);
  KvCacheManager plain(32, 4, true, false);
  REQUIRE(plain.allocate_prompt(1, a));
  plain.commit_tokens(1, a, 8);
  CHECK(plain.peek_cached_tokens(a) == 7);
  CHECK(plain.exact_slot(1) == -1);
  kv.check_invariants();
}

namespace {

// A tiny random Llama with head_dim D over an fp8 cache (scale 1.0: no scales in the checkpoint).
struct Fp8Model {
  std::unique_ptr<Backend> backend = make_cpu_backend(1);
  Checkpoint checkpoint;
  std::unique_ptr<Model> model;
  ByteTokenizer tokenizer;
  std::deque<std::unique_ptr<LocalExecutor>> executors;
  explicit Fp8Model(int head_dim)
      : checkpoint(random_checkpoint(tiny_llama_config(kTinyModelVocab, 2, head_dim), 11, 0.5f)),
        model(make_model(checkpoint, *backend)) {}
  LocalExecutor& executor(KvCacheOptions kv = KvCacheDtype::Fp8) {
    return *executors.emplace_back(std::make_unique<LocalExecutor>(*model, kv));
  }
};

SamplingParams scored(int max_tokens, std::optional<uint64_t> seed = std::nullopt, int n = 1) {
  SamplingParams p;
  p.temperature = seed ? 1.0f : 0.0f;
  p.seed = seed;
  p.n = n;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  p.logprobs = 3;
  return p;
}

struct Job {
  std::vector<int> prompt;
  SamplingParams params;
};

// The jobs submitted at once (or one after another: `sequential`) and stepped to the end, the
// scheduler's invariants checked every step.
std::vector<RequestResult> run(Fp8Model& m, const std::vector<Job>& jobs, EngineConfig cfg, bool sequential = false) {
  Engine engine(m.executor(), m.tokenizer, cfg);
  REQUIRE(engine.kv_spec().exact_ring_blocks > 0);
  std::vector<RequestResult> out;
  std::vector<int64_t> ids;
  auto drain = [&] {
    for (int steps = 0; engine.has_unfinished(); ++steps) {
      REQUIRE(engine.step());
      engine.scheduler().check_invariants();
      REQUIRE(steps < 10000);
    }
  };
  for (const Job& j : jobs) {
    ids.push_back(engine.submit(j.prompt, j.params));
    if (sequential) drain();
  }
  drain();
  for (int64_t id : ids) out.push_back(*engine.take_result(id));
  return out;
}

void check_same(const std::vector<RequestResult>& got, const std::vector<RequestResult>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    REQUIRE(got[i].outputs.size() == want[i].outputs.size());
    for (size_t k = 0; k < got[i].outputs.size(); ++k) {
      const SequenceOutput &a = got[i].outputs[k], &b = want[i].outputs[k];
      INFO("request " << i << ", sequence " << k);
      CHECK(a.token_ids == b.token_ids);
      REQUIRE(a.logprobs.size() == b.logprobs.size());
      for (size_t t = 0; t < a.logprobs.size(); ++t) {
        CHECK(a.logprobs[t].logprob == b.logprobs[t].logprob);
        REQUIRE(a.logprobs[t].top.size() == b.logprobs[t].top.size());
        for (size_t j = 0; j < a.logprobs[t].top.size(); ++j)
          CHECK(a.logprobs[t].top[j].logprob == b.logprobs[t].top[j].logprob);
      }
    }
  }
}

// The continuations the runs produced, for the replay proposer.
std::vector<std::vector<int32_t>> continuations(const std::vector<Job>& jobs, const std::vector<RequestResult>& r) {
  std::vector<std::vector<int32_t>> refs;
  for (size_t i = 0; i < jobs.size(); ++i)
    for (const SequenceOutput& o : r[i].outputs) {
      std::vector<int32_t> seq(jobs[i].prompt.begin(), jobs[i].prompt.end());
      seq.insert(seq.end(), o.token_ids.begin(), o.token_ids.end());
      refs.push_back(std::move(seq));
    }
  return refs;
}

}  // namespace

TEST_CASE("fp8 with exact open blocks: the same bits alone, batched, chunked, speculated, forked and cached") {
  for (int head_dim : {8, 32}) {  // the dequantized copy; in place (AVX-512)
    INFO("head_dim " << head_dim);
    Fp8Model m(head_dim);
    const std::vector<Job> jobs = {{prompt_of(5, 1), scored(30)},       {prompt_of(40, 2), scored(21)},
                                   {prompt_of(17, 3), scored(26, 7)},   {prompt_of(32, 4), scored(9)},
                                   {prompt_of(23, 5), scored(15, 9, 3)}};
    std::vector<RequestResult> alone;
    for (const Job& j : jobs) alone.push_back(run(m, {j}, tiny_engine_options()).front());

    EngineConfig chunked = tiny_engine_options();
    chunked.sched.max_num_batched_tokens = 7;  // prefill chunks that start and end inside blocks
    check_same(run(m, jobs, chunked), alone);
    check_same(run(m, jobs, tiny_engine_options()), alone);

    // Drafts accepted and rejected (one in three corrupted), so rollbacks cross block boundaries;
    // 20 drafts a step span two blocks past the open one (a ring of 3).
    for (int k : {4, 20}) {
      EngineConfig spec = tiny_engine_options();
      spec.proposer = std::make_shared<ReplayProposer>(continuations(jobs, alone), 3);
      spec.num_speculative_tokens = k;
      INFO(k << " speculative tokens");
      check_same(run(m, jobs, spec), alone);
    }
    EngineConfig ngram = tiny_engine_options();
    ngram.proposer = std::make_shared<NgramProposer>(1, 3);
    ngram.num_speculative_tokens = 5;
    check_same(run(m, jobs, ngram), alone);

    // The prefix cache: the same prompts again on one engine (a 32-token prompt is cached whole).
    std::vector<Job> twice = jobs;
    twice.insert(twice.end(), jobs.begin(), jobs.end());
    std::vector<RequestResult> expect = alone;
    expect.insert(expect.end(), alone.begin(), alone.end());
    check_same(run(m, twice, tiny_engine_options(), true), expect);

    // Every sequence (forked children included) against the teacher-forced scores of its tokens
    // through the same cache, chunked otherwise: the same logits, so the logprobs agree to rounding
    // (the engine's are over the tokenizer's ids, the model's padding rows left out).
    ScorerOptions so;
    so.prefill_chunk = 11;
    Scorer scorer(m.executor(), m.tokenizer, so);
    const int vocab = m.tokenizer.vocab_size();
    int compared = 0;
    for (size_t i = 0; i < jobs.size(); ++i)
      for (const SequenceOutput& o : alone[i].outputs) {
        std::vector<int> ids = jobs[i].prompt;
        ids.insert(ids.end(), o.token_ids.begin(), o.token_ids.end());
        const std::vector<std::vector<float>> rows = scorer.score(ids);
        for (size_t t = 0; t < o.token_ids.size(); ++t, ++compared) {
          const std::vector<float>& row = rows[jobs[i].prompt.size() - 1 + t];
          double sum = 0;
          for (int v = 0; v < vocab; ++v) sum += std::exp(double(row[size_t(v)]));
          const double lp = double(row[size_t(o.token_ids[t])]) - std::log(sum);
          INFO("request " << i << ", token " << t);
          CHECK(std::fabs(lp - o.logprobs[t].logprob) < 1e-4);
        }
      }
    CHECK(compared == 30 + 21 + 26 + 9 + 3 * 15);
  }
}

TEST_CASE("fp8 with exact open blocks: the first block is the f32 cache's, bit for bit; later ones are fp8's") {
  for (int head_dim : {8, 32}) {
    INFO("head_dim " << head_dim);
    Fp8Model m(head_dim);
    const std::vector<int> text = prompt_of(200, 3);
    Scorer f32(m.executor(KvCacheDtype::Auto), m.tokenizer);
    Scorer exact(m.executor(), m.tokenizer);
    std::vector<double> plain_lp;
    {
      Scorer plain(m.executor(KvCacheOptions(KvCacheDtype::Fp8, /*exact_open_block=*/false)), m.tokenizer);
      plain_lp = plain.target_logprobs(text, 1);
    }
    const std::vector<double> ref = f32.target_logprobs(text, 1), got = exact.target_logprobs(text, 1);
    // positions 0..15 predict tokens 1..16: rows 0..15
    for (int p = 0; p < 16; ++p) {
      CHECK(got[size_t(p)] == ref[size_t(p)]);
      CHECK(plain_lp[size_t(p)] != ref[size_t(p)]);  // plain fp8 rounds them
    }
    double err_exact = 0, err_plain = 0;
    for (size_t p = 16; p < ref.size(); ++p)
      err_exact += std::fabs(got[p] - ref[p]), err_plain += std::fabs(plain_lp[p] - ref[p]);
    MESSAGE("head_dim " << head_dim << ": mean |dlogprob| against the f32 cache past the first block: exact rows "
                        << err_exact / double(ref.size() - 16) << ", plain fp8 " << err_plain / double(ref.size() - 16));
    // Past it the older blocks are read in fp8. (Whether that is closer to the f32 cache than
    // plain fp8 is a property of trained models, measured by bench ppl: this random model's
    // errors grow chaotically, 0.48 against 0.50 at head_dim 8 and 1.08 against 1.01 at 32.)
    CHECK(err_exact > 0);
    CHECK(err_exact != err_plain);
  }
}
