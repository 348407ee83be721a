// The Engine's logic without a model (scripted_executor.h): an executor whose next token is a rule
// over what it reads back from its own KV cache, so every output below is checked against the
// rule applied to the sequence's true tokens. Batching, preemption, prefix-cache hits, forks,
// stops, aborts from callbacks and n-gram drafts, each against its direct expectation.
#include <doctest/doctest.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "byte_tokenizer.h"
#include "engine/engine.h"
#include "engine/sample/sequence_state.h"
#include "engine/spec/ngram_proposer.h"
#include "scripted_executor.h"

using namespace llmctl;
using namespace llmctl::test;

namespace {

using Rule = ScriptedExecutor::Rule;

struct Rig {
  ScriptedExecutor exec;
  ByteTokenizer tok;
  std::unique_ptr<Engine> engine;
  explicit Rig(int num_blocks = 64, Rule rule = Rule::ContextHash, EngineConfig cfg = {})
      : exec(ByteTokenizer::kVocab, rule) {
    cfg.num_blocks = num_blocks;
    engine = std::make_unique<Engine>(exec, tok, cfg);
  }
  RequestResult run(int64_t id) {
    engine->drain();
    auto r = engine->take_result(id);
    REQUIRE(r.has_value());
    return *r;
  }
};

std::vector<int32_t> prompt(int len, int salt) {
  std::vector<int32_t> p;
  for (int i = 0; i < len; ++i) p.push_back('a' + (i * 5 + salt * 3) % 26);
  return p;
}

SamplingParams greedy(int max_tokens) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  return p;
}

}  // namespace

TEST_CASE("scripted engine: greedy requests batched together each follow the rule over their own KV") {
  Rig rig;
  std::vector<int64_t> ids;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) {
    prompts.push_back(prompt(5 + 7 * i, i));
    ids.push_back(rig.engine->submit(std::vector<int>(prompts.back().begin(), prompts.back().end()), greedy(10 + 3 * i)));
  }
  for (int i = 0; i < 8; ++i) {
    const RequestResult r = rig.run(ids[size_t(i)]);
    REQUIRE(r.outputs.size() == 1);
    CHECK(r.outputs[0].token_ids == rig.exec.continuation(prompts[size_t(i)], 10 + 3 * i));
    CHECK(r.outputs[0].finish_reason == "length");
  }
  CHECK(rig.exec.max_step_tokens > 8);  // prompts and decodes shared steps
  CHECK(rig.engine->stats().generated_tokens == 8 * 10 + 3 * 28);
}

TEST_CASE("scripted engine: preemption in a cache too small for every request at once changes no output") {
  Rig rig(12);  // 12 blocks of 16: about two of these requests at a time
  std::vector<int64_t> ids;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 6; ++i) {
    prompts.push_back(prompt(40 + i, i));
    ids.push_back(rig.engine->submit(std::vector<int>(prompts.back().begin(), prompts.back().end()), greedy(40)));
  }
  for (int i = 0; i < 6; ++i)
    CHECK(rig.run(ids[size_t(i)]).outputs[0].token_ids == rig.exec.continuation(prompts[size_t(i)], 40));
  CHECK(rig.engine->stats().preemptions > 0);
}

TEST_CASE("scripted engine: a prompt seen before is read from cached blocks, with the same output") {
  Rig rig;
  const std::vector<int32_t> p = prompt(70, 1);
  const std::vector<int> pi(p.begin(), p.end());
  const RequestResult first = rig.run(rig.engine->submit(pi, greedy(12)));
  const int64_t steps_before = rig.exec.steps;
  const RequestResult again = rig.run(rig.engine->submit(pi, greedy(12)));
  CHECK(first.outputs[0].token_ids == rig.exec.continuation(p, 12));
  CHECK(again.outputs[0].token_ids == first.outputs[0].token_ids);
  CHECK(rig.engine->stats().kv.prefix_hit_rate > 0);
  CHECK(rig.exec.steps - steps_before == 12);  // the cached prompt took no steps of its own
}

TEST_CASE("scripted engine: n = 3 forks from the prompt's blocks; each child equals its solo run") {
  SamplingParams p;
  p.temperature = 4.0f;  // far from greedy: children differ
  p.max_tokens = 24;
  p.n = 3;
  p.seed = 99;
  const std::vector<int32_t> pr = prompt(37, 2);  // the prompt ends inside a block: forks copy it
  Rig rig;
  const RequestResult r = rig.run(rig.engine->submit(std::vector<int>(pr.begin(), pr.end()), p));
  REQUIRE(r.outputs.size() == 3);
  CHECK(rig.exec.copied_blocks > 0);
  CHECK(r.outputs[0].token_ids != r.outputs[1].token_ids);
  for (int i = 0; i < 3; ++i) {
    // Child i draws with child_seed(seed, i); alone, a request with that seed draws the same.
    SamplingParams solo = p;
    solo.n = 1;
    solo.seed = child_seed(99, i);
    Rig alone;
    const RequestResult s = alone.run(alone.engine->submit(std::vector<int>(pr.begin(), pr.end()), solo));
    CHECK(r.outputs[size_t(i)].token_ids == s.outputs[0].token_ids);
  }
}

TEST_CASE("scripted engine: a stop token ends its sequence, left out of the output; max_tokens gives length") {
  Rig rig;
  const std::vector<int32_t> pr = prompt(20, 3);
  const std::vector<int> ref = rig.exec.continuation(pr, 30);
  SamplingParams p = greedy(30);
  p.stop_token_ids = {ref[7]};  // its first appearance ends the sequence
  size_t first = 0;
  while (ref[first] != ref[7]) ++first;
  const RequestResult r = rig.run(rig.engine->submit(std::vector<int>(pr.begin(), pr.end()), p));
  CHECK(r.outputs[0].finish_reason == "stop");
  CHECK(r.outputs[0].token_ids == std::vector<int>(ref.begin(), ref.begin() + long(first)));
}

TEST_CASE("scripted engine: a request aborted from its own stream callback ends there; the others go on") {
  Rig rig;
  const std::vector<int32_t> pa = prompt(9, 4), pb = prompt(13, 5);
  int64_t a = 0;
  int a_events = 0;
  a = rig.engine->submit(std::vector<int>(pa.begin(), pa.end()), greedy(20), [&](const StreamEvent& e) {
    if (++a_events == 3) rig.engine->abort(e.request_id);
  });
  const int64_t b = rig.engine->submit(std::vector<int>(pb.begin(), pb.end()), greedy(20));
  const RequestResult ra = rig.run(a), rb = rig.run(b);
  CHECK(ra.outputs[0].finish_reason == "abort");
  CHECK(ra.outputs[0].token_ids.size() < 20);
  const std::vector<int> ref = rig.exec.continuation(pa, 20);
  CHECK(ra.outputs[0].token_ids == std::vector<int>(ref.begin(), ref.begin() + long(ra.outputs[0].token_ids.size())));
  CHECK(rb.outputs[0].token_ids == rig.exec.continuation(pb, 20));
  CHECK(rig.engine->scheduler().kv().num_available_blocks() == 64);  // every block back
}

TEST_CASE("scripted engine: n-gram drafts on a cycling text are accepted, and the output is the run without") {
  EngineConfig cfg;
  cfg.proposer = std::make_shared<NgramProposer>(2, 4);
  cfg.num_speculative_tokens = 4;
  Rig with(64, Rule::LastToken, cfg), without(64, Rule::LastToken);
  const std::vector<int32_t> pr = prompt(10, 6);
  const RequestResult a = with.run(with.engine->submit(std::vector<int>(pr.begin(), pr.end()), greedy(80)));
  const RequestResult b = without.run(without.engine->submit(std::vector<int>(pr.begin(), pr.end()), greedy(80)));
  CHECK(a.outputs[0].token_ids == with.exec.continuation(pr, 80));
  CHECK(a.outputs[0].token_ids == b.outputs[0].token_ids);
  const EngineStats s = with.engine->stats();
  CHECK(s.draft_tokens > 0);
  CHECK(s.accepted_draft_tokens > 20);
  CHECK(with.exec.steps < without.exec.steps);
}

TEST_CASE("scripted engine: stream events carry each output token once, in order, with the result's text") {
  // Drafts (several tokens a step), n = 2 (forked children) and a stop string (held-back text):
  // the events' tokens and text, joined, are the result's, and each sequence gets one done event.
  EngineConfig cfg;
  cfg.proposer = std::make_shared<NgramProposer>(2, 4);
  cfg.num_speculative_tokens = 4;
  Rig rig(64, Rule::LastToken, cfg);
  struct Seen {
    std::vector<int> tokens;
    std::string text;
    int done = 0;
    std::string reason;
  };
  std::map<std::pair<int64_t, int>, Seen> seen;
  auto record = [&](const StreamEvent& e) {
    Seen& s = seen[{e.request_id, e.index}];
    CHECK(s.done == 0);  // nothing after the done event
    s.tokens.insert(s.tokens.end(), e.token_ids.begin(), e.token_ids.end());
    s.text += e.text;
    if (e.done) {
      ++s.done;
      s.reason = std::string(e.finish_reason);
    }
  };
  const std::vector<int32_t> pr = prompt(10, 6), pb = prompt(23, 7), pc = prompt(15, 8);
  const std::vector<int> ref = rig.exec.continuation(pc, 60);
  SamplingParams sampled;
  sampled.temperature = 2.0f;
  sampled.n = 2;
  sampled.seed = 5;
  sampled.max_tokens = 30;
  SamplingParams stopped = greedy(60);
  stopped.stop = {rig.tok.decode(std::vector<int>(ref.begin() + 20, ref.begin() + 22))};
  std::vector<int64_t> ids = {rig.engine->submit(std::vector<int>(pr.begin(), pr.end()), greedy(80), record),
                              rig.engine->submit(std::vector<int>(pb.begin(), pb.end()), sampled, record),
                              rig.engine->submit(std::vector<int>(pc.begin(), pc.end()), stopped, record)};
  rig.engine->drain();
  for (int64_t id : ids) {
    const std::optional<RequestResult> r = rig.engine->take_result(id);
    REQUIRE(r.has_value());
    for (const SequenceOutput& o : r->outputs) {
      const Seen& s = seen[{id, o.index}];
      CHECK(s.tokens == o.token_ids);
      CHECK(s.text == o.text);
      CHECK(s.done == 1);
      CHECK(s.reason == o.finish_reason);
    }
  }
  CHECK(rig.engine->stats().accepted_draft_tokens > 0);
  CHECK(seen[{ids[2], 0}].reason == "stop");
}
