// Scheduler policy on hand-made cases (block size 4): token budget, chunked prefill, admission by blocks,
// preemption of the youngest, abort in every state, fork, and the BatchPlan built from a step.
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "engine/core/error.h"
#include "engine/sched/batch_builder.h"
#include "engine/sched/scheduler.h"
#include "token_runs.h"

using namespace llmctl;

namespace {
using test::toks;
SchedulerConfig cfg(int max_seqs, int max_tokens, bool chunked = true, bool prefix = true) {
  SchedulerConfig c;
  c.max_num_seqs = max_seqs;
  c.max_num_batched_tokens = max_tokens;
  c.block_size = 4;
  c.enable_prefix_caching = prefix;
  c.chunked_prefill = chunked;
  return c;
}
void check_seq(const ScheduledSeq& s, int64_t id, int start, int n, bool samples) {
  CHECK(s.seq_id == id);
  CHECK(s.start == start);
  CHECK(s.num_new == n);
  CHECK(s.samples == samples);
}
// Reports every scheduled sequence: a token (100 + id) for those that sampled.
void done_all(Scheduler& s, const SchedulerOutput& out) {
  for (const auto& q : out.seqs) s.on_step_done(q.seq_id, q.samples ? std::optional<int32_t>(int32_t(100 + q.seq_id)) : std::nullopt);
  s.check_invariants();
}
}  // namespace

TEST_CASE("scheduler: token budget, chunked prefill across steps, decodes first; the batch plan") {
  Scheduler s(cfg(8, 8), 32);
  s.add(1, toks(0, 10), 20);
  s.add(2, toks(50, 10), 20);
  auto o1 = s.schedule();
  REQUIRE(o1.seqs.size() == 1);  // the budget is spent on seq 1's first chunk
  check_seq(o1.seqs[0], 1, 0, 8, false);
  CHECK(o1.num_tokens == 8);
  CHECK(s.num_waiting() == 1);
  done_all(s, o1);
  auto o2 = s.schedule();
  REQUIRE(o2.seqs.size() == 2);
  check_seq(o2.seqs[0], 1, 8, 2, true);   // last chunk of seq 1 samples
  check_seq(o2.seqs[1], 2, 0, 6, false);  // seq 2 admitted with the rest of the budget
  done_all(s, o2);
  CHECK(s.sequence(1).tokens.size() == 11);
  auto o3 = s.schedule();
  REQUIRE(o3.seqs.size() == 2);
  check_seq(o3.seqs[0], 1, 10, 1, true);  // decode first
  check_seq(o3.seqs[1], 2, 6, 4, true);
  BatchPlan plan = build_batch_plan(o3, s);
  plan.validate(4, 32);
  CHECK(plan.token_ids == std::vector<int32_t>{101, 56, 57, 58, 59});
  CHECK(plan.positions == std::vector<int32_t>{10, 6, 7, 8, 9});
  CHECK(plan.query_start == std::vector<int32_t>{0, 1, 5});
  CHECK(plan.context_len == std::vector<int32_t>{11, 10});
  CHECK(plan.logits_rows == std::vector<int32_t>{0, 4});
  CHECK(plan.max_blocks_per_seq == 3);
  CHECK(plan.slot_mapping[0] == s.kv().group(0).slot(1, 10));
  done_all(s, o3);
  CHECK(s.stats().steps == 3);
  CHECK(s.stats().scheduled_tokens == 8 + 8 + 5);
}

TEST_CASE("scheduler: max_num_seqs caps the step; without chunked prefill a prompt must fit whole") {
  SUBCASE("max_num_seqs") {
    Scheduler s(cfg(2, 100), 32);
    for (int i = 0; i < 3; ++i) s.add(i, toks(10 * i, 3), 8);
    auto o = s.schedule();
    CHECK(o.seqs.size() == 2);
    CHECK(s.num_waiting() == 1);
  }
  SUBCASE("no chunking") {
    Scheduler s(cfg(8, 8, false), 32);
    s.add(1, toks(0, 6), 8);
    s.add(2, toks(20, 5), 8);
    auto o = s.schedule();
    REQUIRE(o.seqs.size() == 1);
    check_seq(o.seqs[0], 1, 0, 6, true);
    done_all(s, o);
    o = s.schedule();
    REQUIRE(o.seqs.size() == 2);  // 1 decode + 5 prompt tokens fit
    check_seq(o.seqs[1], 2, 0, 5, true);
    CHECK_THROWS_AS(s.add(3, toks(0, 4), 10), InputError);  // 9 tokens may need one step
  }
}

TEST_CASE("scheduler: bad requests are rejected") {
  Scheduler s(cfg(8, 64), 4);
  CHECK_THROWS_AS(s.add(1, {}, 4), InputError);
  CHECK_THROWS_AS(s.add(1, toks(0, 4), 4), InputError);   // no room to generate
  CHECK_THROWS_AS(s.add(1, toks(0, 4), 18), InputError);  // 17 tokens need 5 blocks of 4
  s.add(1, toks(0, 4), 17);                               // 16 tokens: 4 blocks
  CHECK_THROWS_AS(s.add(1, toks(0, 4), 17), Error);        // id in use
}

TEST_CASE("scheduler: a request waits until its blocks can be had") {
  Scheduler s(cfg(8, 64), 4);
  s.add(1, toks(0, 12), 16);  // 3 blocks
  s.add(2, toks(50, 8), 9);   // 2 blocks: only 1 left
  s.add(3, toks(90, 1), 4);   // would fit, but FCFS: no overtaking
  auto o = s.schedule();
  REQUIRE(o.seqs.size() == 1);
  CHECK(o.seqs[0].seq_id == 1);
  CHECK(s.num_waiting() == 2);
  CHECK(s.on_step_done(1, 7, /*finished=*/true));
  CHECK(s.kv().group(0).pool().num_in_use() == 0);
  o = s.schedule();
  REQUIRE(o.seqs.size() == 2);
  CHECK(o.seqs[0].seq_id == 2);
  CHECK(o.seqs[1].seq_id == 3);
  s.check_invariants();
}

TEST_CASE("scheduler: a decode without a block preempts the youngest, which recomputes later") {
  Scheduler s(cfg(8, 64), 4);
  s.add(1, toks(0, 4), 12);
  s.add(2, toks(20, 4), 12);
  s.add(3, toks(40, 7), 12);
  auto o = s.schedule();
  REQUIRE(o.seqs.size() == 3);  // 1 + 1 + 2 blocks: the pool is full
  CHECK(s.kv().group(0).pool().num_available() == 0);
  done_all(s, o);
  o = s.schedule();  // seq 1 and 2 need a second block each
  REQUIRE(o.seqs.size() == 2);
  CHECK(o.seqs[0].seq_id == 1);
  CHECK(o.seqs[1].seq_id == 2);
  CHECK(o.preempted == std::vector<int64_t>{3});
  CHECK(s.stats().preemptions == 1);
  const Sequence& r3 = s.sequence(3);
  CHECK(r3.state == SeqStatus::waiting);
  CHECK(r3.num_computed == 0);
  CHECK(r3.tokens.size() == 8);  // its sampled token is kept
  CHECK(r3.num_preemptions == 1);
  done_all(s, o);
  o = s.schedule();  // no blocks for seq 3 yet
  CHECK(o.seqs.size() == 2);
  CHECK(s.num_waiting() == 1);
  s.on_step_done(1, 5, true);
  s.on_step_done(2, 5, true);
  o = s.schedule();
  REQUIRE(o.seqs.size() == 1);
  check_seq(o.seqs[0], 3, 0, 8, true);  // recompute prompt + generated token, then sample
  done_all(s, o);
}

TEST_CASE("scheduler: the youngest preempts itself") {
  Scheduler s(cfg(8, 64), 3);
  s.add(1, toks(0, 2), 8);
  s.add(2, toks(20, 8), 12);
  auto o = s.schedule();
  REQUIRE(o.seqs.size() == 2);
  done_all(s, o);
  o = s.schedule();  // seq 2 needs block 3 of 3; it is the youngest
  REQUIRE(o.seqs.size() == 1);
  check_seq(o.seqs[0], 1, 2, 1, true);
  CHECK(o.preempted == std::vector<int64_t>{2});
  CHECK(s.sequence(2).state == SeqStatus::waiting);
  done_all(s, o);
}

TEST_CASE("scheduler: abort in every state frees blocks at once") {
  Scheduler s(cfg(8, 64), 4);
  SUBCASE("waiting") {
    s.add(1, toks(0, 4), 8);
    CHECK(s.abort(1));
    CHECK_FALSE(s.has(1));
    CHECK(s.schedule().empty());
  }
  SUBCASE("running, between steps") {
    s.add(1, toks(0, 6), 8);
    done_all(s, s.schedule());
    CHECK(s.kv().group(0).pool().num_in_use() == 2);
    CHECK(s.abort(1));
    CHECK(s.kv().group(0).pool().num_in_use() == 0);
  }
  SUBCASE("running, in flight") {
    s.add(1, toks(0, 6), 8);
    s.add(2, toks(10, 2), 8);
    auto o = s.schedule();
    REQUIRE(o.seqs.size() == 2);
    CHECK(s.abort(1));
    CHECK(s.kv().group(0).pool().num_in_use() == 1);
    s.check_invariants();
    CHECK(s.on_step_done(1, 9));  // the engine may still report it: ignored
    CHECK_FALSE(s.on_step_done(2, 9));
    CHECK_THROWS_AS(s.on_step_done(1, 9), Error);  // but only once
  }
  SUBCASE("preempted") {
    s.add(1, toks(0, 4), 12);
    s.add(2, toks(20, 4), 12);
    s.add(3, toks(40, 7), 12);
    done_all(s, s.schedule());
    auto o = s.schedule();
    CHECK(o.preempted == std::vector<int64_t>{3});
    done_all(s, o);
    CHECK(s.abort(3));
    CHECK(s.num_waiting() == 0);
    CHECK(s.abort(1));
    CHECK(s.abort(2));
    CHECK(s.kv().group(0).pool().num_in_use() == 0);
  }
  CHECK_FALSE(s.abort(77));
  s.check_invariants();
}

TEST_CASE("scheduler: fork shares the prompt's blocks; the first decode copies the partial block") {
  Scheduler s(cfg(8, 64), 16);
  s.add(1, toks(0, 6), 12);
  auto o = s.schedule();
  s.on_step_done(1, 50);
  s.fork(1, 2, 60);  // the child sampled its own first token
  CHECK(s.sequence(2).tokens.back() == 60);
  CHECK(s.sequence(1).tokens.back() == 50);
  CHECK(s.kv().block_table(2) == s.kv().block_table(1));
  CHECK(s.kv().group(0).pool().num_in_use() == 2);  // the prompt's blocks, once
  s.check_invariants();
  o = s.schedule();
  REQUIRE(o.seqs.size() == 2);
  check_seq(o.seqs[0], 1, 6, 1, true);
  check_seq(o.seqs[1], 2, 6, 1, true);
  REQUIRE(o.block_copies.size() == 1);  // one KV group
  REQUIRE(o.block_copies[0].size() == 1);  // the parent writes first and gets the copy
  CHECK(o.block_copies[0][0].first == s.kv().block_table(2)[1]);
  CHECK(o.block_copies[0][0].second == s.kv().block_table(1)[1]);
  CHECK(s.kv().block_table(1)[0] == s.kv().block_table(2)[0]);
  BatchPlan plan = build_batch_plan(o, s);
  plan.validate(4, 16);
  CHECK(plan.token_ids == std::vector<int32_t>{50, 60});
  done_all(s, o);
  CHECK_THROWS_AS(s.fork(1, 2), Error);  // id in use
}

TEST_CASE("scheduler: requests finish at max_total_tokens and leave nothing behind") {
  Scheduler s(cfg(4, 16), 8);
  s.add(1, toks(0, 5), 7);
  int steps = 0;
  while (s.has_unfinished()) {
    done_all(s, s.schedule());
    ++steps;
  }
  CHECK(steps == 2);  // prefill + sample, decode + sample -> 7 tokens
  CHECK(s.stats().finished == 1);
  CHECK(s.kv().group(0).pool().num_in_use() == 0);
}

TEST_CASE("scheduler: a shared sequence outlives the scheduler's hold, with its tokens and end state") {
  Scheduler s(cfg(4, 16), 8);
  s.add(1, toks(0, 5), 7);
  s.add(2, toks(10, 3), 9);
  const std::shared_ptr<const Sequence> one = s.share(1), two = s.share(2);
  CHECK(&s.sequence(1) == one.get());  // the scheduler's own object, not a copy
  done_all(s, s.schedule());
  CHECK(one->tokens.size() == 6);  // the prompt and the sampled token, seen through the share
  CHECK(s.abort(2));
  CHECK(two->state == SeqStatus::aborted);
  CHECK(two->tokens == std::vector<int32_t>{10, 11, 12, 102});
  while (s.has_unfinished()) done_all(s, s.schedule());
  CHECK_FALSE(s.has(1));
  CHECK(one->state == SeqStatus::finished);
  CHECK(one->num_scheduled == 0);
  CHECK(one->tokens == std::vector<int32_t>{0, 1, 2, 3, 4, 101, 101});
  CHECK_THROWS_AS(s.share(1), Error);
}

TEST_CASE("scheduler: 20 requests with a common 200-token system prompt compute its blocks once") {
  for (bool defer : {true, false}) {
    CAPTURE(defer);
    SchedulerConfig c = cfg(32, 4096);
    c.block_size = 16;
    c.defer_shared_prefill = defer;
    Scheduler s(c, 512);
    const auto system = toks(1000, 200);  // 12 full blocks of 16 + 8 tokens
    for (int i = 0; i < 20; ++i) {
      auto p = system;
      for (int j = 0; j < 10; ++j) p.push_back(int32_t(5000 + 10 * i + j));
      s.add(i, p, 220);
    }
    int64_t computed = 0;
    for (int step = 0; step < 3; ++step) {
      auto o = s.schedule();
      for (const auto& q : o.seqs) computed += q.num_new;
      done_all(s, o);
    }
    const KvCacheStats st = s.kv().stats();
    if (defer) {
      // request 0 computes 210 tokens; the 19 others find 192 cached and compute 18 each; plus decodes
      CHECK(st.prompt_tokens_cached == 19 * 192);
      CHECK(st.prefix_hit_rate == doctest::Approx(19.0 * 192 / (20 * 210)));
      // 12 shared full blocks once + 2 private blocks (tokens 192..210 and the decode) per request
      CHECK(st.used_blocks == 12 + 20 * 2);
      CHECK(computed == 210 + 1 + 19 * 18 + 20);  // step 1: request 0; step 2: its decode + 19 suffixes; step 3: 20 decodes
    } else {
      CHECK(st.prompt_tokens_cached == 0);  // all admitted in the same step: nothing cached yet
      CHECK(st.used_blocks == 20 * 14);
      CHECK(computed == 20 * 210 + 19 + 20);  // request 19 is split by the budget: 19 decodes in step 2
    }
  }
}

TEST_CASE("scheduler: n = 4 by fork holds the prompt's blocks once") {
  Scheduler s(cfg(8, 512), 80);
  s.add(0, toks(0, 201), 260);  // 51 blocks of 4 (the last holds 1 token)
  done_all(s, s.schedule());
  for (int k = 1; k < 4; ++k) s.fork(0, k, int32_t(900 + k));
  CHECK(s.kv().group(0).pool().num_in_use() == 51);
  auto o = s.schedule();  // each decode writes position 201, in the shared partial block
  CHECK(o.seqs.size() == 4);
  CHECK(o.block_copies.at(0).size() == 3);  // three copy it; the last one keeps the original
  CHECK(s.kv().group(0).pool().num_in_use() == 51 + 3);
  done_all(s, o);
}

TEST_CASE("scheduler: k drafts are computed with the last token in one step; j rejected are rolled back") {
  Scheduler s(cfg(8, 64), 16);
  s.add(1, toks(0, 6), 40, true, SeqOwner{7, 2});
  auto o = s.schedule();
  REQUIRE(o.seqs.size() == 1);
  CHECK(o.seqs[0].owner.request_id == 7);
  CHECK(o.seqs[0].owner.index == 2);
  done_all(s, o);  // token 101 at position 6
  const std::vector<int32_t> draft = {500, 501, 502, 503, 504};
  s.append_draft(1, draft);
  s.check_invariants();
  CHECK(s.sequence(1).num_draft == 5);
  CHECK(s.sequence(1).num_generated() == 1);
  CHECK(s.sequence(1).tokens.size() == 12);
  o = s.schedule();
  REQUIRE(o.seqs.size() == 1);
  check_seq(o.seqs[0], 1, 6, 6, true);  // the last verified token and its 5 drafts
  CHECK(o.seqs[0].num_draft == 5);
  BatchPlan plan = build_batch_plan(o, s);
  plan.validate(4, 16);
  CHECK(plan.logits_rows == std::vector<int32_t>{0, 1, 2, 3, 4, 5});  // each predicts the next token
  CHECK(s.kv().block_table(1).size() == 3);
  s.check_invariants();
  // Two drafts accepted, three rejected; the verifier's own token 77 follows the accepted ones.
  const std::vector<int32_t> fix = {77};
  CHECK_FALSE(s.on_step_done(1, StepOutcome{2, fix, false}));
  s.check_invariants();
  const Sequence& r = s.sequence(1);
  CHECK(r.tokens == std::vector<int32_t>{0, 1, 2, 3, 4, 5, 101, 500, 501, 77});
  CHECK(r.num_computed == 9);
  CHECK(r.num_draft == 0);
  CHECK(s.kv().num_computed(1) == 9);
  CHECK(s.kv().block_table(1).size() == 3);  // 9 computed tokens still need 3 blocks
  // Full blocks hashed: [0..3] and [4 5 101 500]; nothing with a rejected draft.
  std::vector<int32_t> rejected = {0, 1, 2, 3, 4, 5, 101, 500, 501, 502, 503, 504, 9};
  CHECK(s.kv().peek_cached_tokens(rejected) == 8);
  // All drafts rejected: back to exactly the verified tokens, the extra block freed.
  s.append_draft(1, std::vector<int32_t>{600, 601, 602});
  o = s.schedule();
  REQUIRE(o.seqs.size() == 1);
  check_seq(o.seqs[0], 1, 9, 4, true);
  CHECK(s.kv().block_table(1).size() == 4);  // 13 tokens
  CHECK(s.on_step_done(1, StepOutcome{0, std::vector<int32_t>{88}, false}) == false);
  s.check_invariants();
  CHECK(s.sequence(1).tokens.size() == 11);
  CHECK(s.sequence(1).num_computed == 10);
  CHECK(s.kv().block_table(1).size() == 3);
  // All accepted plus a bonus token.
  s.append_draft(1, std::vector<int32_t>{700, 701});
  o = s.schedule();
  CHECK(o.seqs[0].num_draft == 2);
  const std::vector<int32_t> bonus = {99};
  CHECK_FALSE(s.on_step_done(1, StepOutcome{2, bonus, false}));
  s.check_invariants();
  CHECK(s.sequence(1).tokens.size() == 14);
  CHECK(s.sequence(1).num_computed == 13);
  CHECK(s.sequence(1).num_pending() == 1);
  // The one-token report refuses a sequence with drafts (it must say how many stay).
  s.append_draft(1, std::vector<int32_t>{1});
  o = s.schedule();
  CHECK_THROWS_AS(s.on_step_done(1, int32_t(5)), Error);
  CHECK_FALSE(s.on_step_done(1, StepOutcome{1, std::vector<int32_t>{5}, false}));
  s.check_invariants();
}

TEST_CASE("scheduler: drafts are never split across steps, dropped on preemption, refused past the limit") {
  SUBCASE("drafts that cannot be verified in one step are refused") {
    Scheduler s(cfg(8, 4), 16);
    s.add(1, toks(0, 3), 40);
    auto o = s.schedule();
    done_all(s, o);  // 3 computed, token 101 pending
    CHECK_THROWS_AS(s.append_draft(1, std::vector<int32_t>{10, 11, 12, 13}), Error);  // 5 over a budget of 4
    s.append_draft(1, std::vector<int32_t>{10, 11, 12});
    s.check_invariants();
    s.add(2, toks(50, 6), 20);
    o = s.schedule();
    REQUIRE(o.seqs.size() == 1);  // the window takes the whole budget; seq 2 waits
    check_seq(o.seqs[0], 1, 3, 4, true);
    CHECK(o.seqs[0].num_draft == 3);
    CHECK_THROWS_AS(s.on_step_done(1, int32_t(7)), Error);  // one-token report with drafts: refused
    s.check_invariants();                                      // ... and nothing changed
    CHECK_FALSE(s.on_step_done(1, StepOutcome{3, std::vector<int32_t>{7}, false}));
    s.check_invariants();
    o = s.schedule();  // the decode, then seq 2's first chunk
    REQUIRE(o.seqs.size() == 2);
    check_seq(o.seqs[0], 1, 7, 1, true);
    check_seq(o.seqs[1], 2, 0, 3, false);
  }
  SUBCASE("a jump-forward run is chunked; its verification window is not") {
    Scheduler s(cfg(8, 4), 16);
    s.add(1, toks(0, 3), 40);
    auto o = s.schedule();
    const std::vector<int32_t> run = {20, 21, 22, 23, 24};  // several known tokens at once
    CHECK_FALSE(s.on_step_done(1, StepOutcome{0, run, false}));
    s.append_draft(1, std::vector<int32_t>{30, 31});
    s.check_invariants();
    o = s.schedule();  // pending [3, 10): window [7, 10); the budget of 4 takes [3, 7)
    REQUIRE(o.seqs.size() == 1);
    check_seq(o.seqs[0], 1, 3, 4, false);
    CHECK(o.seqs[0].num_draft == 0);
    CHECK_THROWS_AS(s.on_step_done(1, StepOutcome{1, {}, false}), Error);  // nothing was verified
  }
  SUBCASE("preemption drops the drafts, keeps the verified tokens") {
    Scheduler s(cfg(8, 64), 4);  // 16 slots
    s.add(1, toks(0, 5), 16);
    s.add(2, toks(50, 5), 16);
    auto o = s.schedule();
    done_all(s, o);
    s.append_draft(2, std::vector<int32_t>{40, 41, 42});  // seq 2 needs 9 slots: 3 blocks
    s.append_draft(1, std::vector<int32_t>{43, 44, 45});
    o = s.schedule();
    CHECK(o.preempted == std::vector<int64_t>{2});
    s.check_invariants();
    CHECK(s.sequence(2).num_draft == 0);
    CHECK(s.sequence(2).tokens == std::vector<int32_t>{50, 51, 52, 53, 54, 102});
    CHECK(o.seqs.size() == 1);
    CHECK(o.seqs[0].num_draft == 3);
  }
  SUBCASE("limits") {
    Scheduler s(cfg(8, 64), 16);
    s.add(1, toks(0, 5), 8);
    CHECK_THROWS_AS(s.append_draft(1, std::vector<int32_t>{1}), Error);  // waiting
    auto o = s.schedule();
    CHECK_THROWS_AS(s.append_draft(1, std::vector<int32_t>{1}), Error);  // in flight
    done_all(s, o);
    CHECK_THROWS_AS(s.append_draft(1, std::vector<int32_t>{1, 2}), Error);  // 6 + 2 reaches 8
    s.append_draft(1, std::vector<int32_t>{1});
    CHECK_THROWS_AS(s.fork(1, 2), Error);  // drafts are not forked
    o = s.schedule();
    CHECK_THROWS_AS(s.on_step_done(1, StepOutcome{2, std::vector<int32_t>{5}, false}), Error);  // 1 draft only
  }
}

TEST_CASE("scheduler: steps in flight leave out each other's sequences, split by max_seqs, never preempt them") {
  SUBCASE("two steps in flight take turns") {
    Scheduler s(cfg(8, 64), 32);
    for (int i = 1; i <= 4; ++i) s.add(i, toks(10 * i, 3), 12);
    const ScheduleLimits half{2, true};
    auto a = s.schedule(half);  // the two oldest
    REQUIRE(a.seqs.size() == 2);
    CHECK(a.seqs[0].seq_id == 1);
    CHECK(a.seqs[1].seq_id == 2);
    auto b = s.schedule(half);  // a is in flight: the other two
    REQUIRE(b.seqs.size() == 2);
    CHECK(b.seqs[0].seq_id == 3);
    CHECK(b.seqs[1].seq_id == 4);
    CHECK(s.schedule(half).empty());  // everything is in flight
    s.check_invariants();
    CHECK_THROWS_AS((void)s.schedule(), Error);  // without steps_in_flight the old rule holds
    done_all(s, a);
    auto c = s.schedule(half);  // a's sequences again, b still in flight
    REQUIRE(c.seqs.size() == 2);
    check_seq(c.seqs[0], 1, 3, 1, true);
    check_seq(c.seqs[1], 2, 3, 1, true);
    done_all(s, b);
    done_all(s, c);
    CHECK(s.schedule().seqs.size() == 4);  // nothing in flight: the plain schedule() again
  }
  SUBCASE("a sequence that needs a block preempts the youngest not in flight") {
    Scheduler s(cfg(8, 64), 4);
    s.add(1, toks(0, 4), 12);
    s.add(2, toks(20, 4), 12);
    s.add(3, toks(40, 7), 12);
    auto o = s.schedule();  // 1 + 1 + 2 blocks: the pool is full
    REQUIRE(o.seqs.size() == 3);
    s.on_step_done(1, 5);
    s.on_step_done(2, 5);
    const ScheduleLimits limits{0, true};
    // Seq 3 (the youngest) is still in flight; 1 needs a second block: seq 2 gives its block up.
    auto b = s.schedule(limits);
    CHECK(b.preempted == std::vector<int64_t>{2});
    REQUIRE(b.seqs.size() == 1);
    check_seq(b.seqs[0], 1, 4, 1, true);
    CHECK(s.sequence(3).state == SeqStatus::running);
    CHECK(s.sequence(3).num_scheduled == 7);  // untouched, in flight
    s.check_invariants();
    s.on_step_done(3, 5);
    done_all(s, b);
  }
  SUBCASE("with only in-flight sequences younger, a sequence preempts itself, not them") {
    Scheduler s(cfg(8, 64), 3);
    s.add(1, toks(0, 4), 12);
    s.add(2, toks(20, 7), 12);
    auto o = s.schedule();  // 1 + 2 blocks: the pool is full
    REQUIRE(o.seqs.size() == 2);
    s.on_step_done(1, 5);
    auto b = s.schedule(ScheduleLimits{0, true});
    CHECK(b.seqs.empty());
    CHECK(b.preempted == std::vector<int64_t>{1});
    CHECK(s.sequence(2).num_scheduled == 7);  // untouched, in flight
    s.check_invariants();
    s.on_step_done(2, 5);
    auto c = s.schedule();
    REQUIRE(c.seqs.size() == 1);
    CHECK(c.seqs[0].seq_id == 2);
  }
}
