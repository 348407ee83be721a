// KvCacheManager: prefix hits, full-prompt hits, fork + copy-on-write, free, statistics. Block size 4.
#include <doctest/doctest.h>

#include <vector>

#include "engine/core/error.h"
#include "engine/kv/kv_cache_manager.h"
#include "token_runs.h"

using namespace llmctl;

namespace {
using test::toks;
// Runs a prompt through: allocate, capacity, commit everything.
int run_prompt(KvCacheManager& kv, int64_t seq, const std::vector<int32_t>& t) {
  auto c = kv.allocate_prompt(seq, t);
  REQUIRE(c.has_value());
  REQUIRE(kv.ensure_capacity(seq, int(t.size())));
  kv.commit_tokens(seq, t, int(t.size()));
  return *c;
}
}  // namespace

TEST_CASE("manager: a shared prefix of full blocks is found, retained and counted in the hit rate") {
  KvCacheManager kv(10, 4);
  auto a = toks(100, 10);  // blocks [100..103] [104..107] [108 109]
  CHECK(run_prompt(kv, 1, a) == 0);
  CHECK(kv.block_table(1).size() == 3);
  auto b = toks(100, 8);
  b.push_back(7);
  b.push_back(8);  // same two full blocks, then different
  CHECK(kv.peek_cached_tokens(b) == 8);
  auto c = kv.allocate_prompt(2, b);
  REQUIRE(c);
  CHECK(*c == 8);
  CHECK(kv.block_table(2)[0] == kv.block_table(1)[0]);
  CHECK(kv.block_table(2)[1] == kv.block_table(1)[1]);
  CHECK(kv.block_table(2)[2] != kv.block_table(1)[2]);
  CHECK(kv.pool().ref_count(kv.block_table(1)[0]) == 2);
  CHECK(kv.num_computed(2) == 8);
  auto st = kv.stats();
  CHECK(st.prompt_tokens_looked_up == 20);
  CHECK(st.prompt_tokens_cached == 8);
  CHECK(st.prefix_hit_rate == doctest::Approx(0.4));
  CHECK(st.used_blocks == 4);
  kv.check_invariants();
}

TEST_CASE("manager: prefix caching off never shares") {
  KvCacheManager kv(10, 4, false);
  auto a = toks(0, 8);
  run_prompt(kv, 1, a);
  CHECK(run_prompt(kv, 2, a) == 0);
  CHECK(kv.pool().num_in_use() == 4);
  CHECK(kv.stats().prefix_hit_rate == 0);
  kv.check_invariants();
}

TEST_CASE("manager: a fully cached prompt recomputes its last token in a writable block") {
  auto a = toks(0, 8);  // exactly two full blocks
  SUBCASE("the last block is shared: copy-on-write") {
    KvCacheManager kv(10, 4);
    run_prompt(kv, 1, a);
    auto c = kv.allocate_prompt(2, a);
    REQUIRE(c);
    CHECK(*c == 7);
    const auto& t1 = kv.block_table(1);
    const auto& t2 = kv.block_table(2);
    CHECK(t2[0] == t1[0]);
    CHECK(t2[1] != t1[1]);
    CHECK(kv.pool().ref_count(t1[1]) == 1);
    auto copies = kv.take_pending_copies();
    REQUIRE(copies.size() == 1);
    CHECK(copies[0] == std::pair<int, int>{t1[1], t2[1]});
    CHECK(kv.ensure_capacity(2, 8));  // nothing more to copy
    CHECK(kv.take_pending_copies().empty());
    kv.check_invariants();
  }
  SUBCASE("the last block is only cached: still copied, the cached block stays intact") {
    KvCacheManager kv(10, 4);
    run_prompt(kv, 1, a);
    auto old = kv.block_table(1);
    kv.free(1);
    CHECK(kv.pool().num_cached() == 2);
    auto c = kv.allocate_prompt(2, a);
    REQUIRE(c);
    CHECK(*c == 7);
    CHECK(kv.block_table(2)[0] == old[0]);
    CHECK(kv.block_table(2)[1] != old[1]);
    CHECK(kv.pool().is_cached(old[1]));
    auto copies = kv.take_pending_copies();
    REQUIRE(copies.size() == 1);
    CHECK(copies[0] == std::pair<int, int>{old[1], kv.block_table(2)[1]});
    CHECK(kv.stats().prompt_tokens_cached == 7);
    kv.check_invariants();
  }
}

TEST_CASE("manager: fork shares every block; the first write into the shared partial block copies it") {
  KvCacheManager kv(10, 4);
  auto a = toks(0, 6);  // one full block, one partial (2 tokens)
  run_prompt(kv, 1, a);
  kv.fork(1, 2);
  const int full = kv.block_table(1)[0], part = kv.block_table(1)[1];
  CHECK(kv.block_table(2) == kv.block_table(1));
  CHECK(kv.pool().ref_count(full) == 2);
  CHECK(kv.pool().ref_count(part) == 2);
  CHECK(kv.num_computed(2) == 6);
  kv.check_invariants();
  REQUIRE(kv.ensure_capacity(2, 7));  // child appends position 6, inside the shared block
  const int mine = kv.block_table(2)[1];
  CHECK(mine != part);
  CHECK(kv.block_table(2)[0] == full);  // full block stays shared
  CHECK(kv.pool().ref_count(part) == 1);
  REQUIRE(kv.ensure_capacity(1, 7));  // the parent now holds its block alone: no copy
  CHECK(kv.block_table(1)[1] == part);
  auto copies = kv.take_pending_copies();
  REQUIRE(copies.size() == 1);
  CHECK(copies[0] == std::pair<int, int>{part, mine});
  CHECK(kv.take_pending_copies().empty());
  CHECK(kv.stats().cow_copies == 1);
  CHECK(kv.slot(2, 6) == mine * 4 + 2);
  CHECK(kv.slot(1, 5) == part * 4 + 1);
  CHECK_THROWS_AS(kv.slot(1, 8), Error);
  kv.check_invariants();
}

TEST_CASE("manager: a pending copy into a block freed before the step is dropped") {
  KvCacheManager kv(10, 4);
  run_prompt(kv, 1, toks(0, 6));
  kv.fork(1, 2);
  REQUIRE(kv.ensure_capacity(2, 7));
  kv.free(2);
  CHECK(kv.take_pending_copies().empty());
  kv.check_invariants();
}

TEST_CASE("manager: out of blocks means nullopt / false with nothing held or changed") {
  KvCacheManager kv(3, 4);
  run_prompt(kv, 1, toks(0, 6));  // 2 blocks
  CHECK_FALSE(kv.allocate_prompt(2, toks(50, 9)).has_value());  // needs 3
  CHECK_FALSE(kv.has(2));
  CHECK(kv.pool().num_in_use() == 2);
  CHECK(kv.stats().prompt_tokens_looked_up == 6);  // failed attempts are not counted
  CHECK_FALSE(kv.ensure_capacity(1, 13));  // needs 2 more, 1 available
  CHECK(kv.block_table(1).size() == 2);
  CHECK(kv.ensure_capacity(1, 12));
  CHECK(kv.block_table(1).size() == 3);
  CHECK_THROWS_AS((void)kv.allocate_prompt(1, toks(0, 2)), Error);  // exists
  kv.check_invariants();
}

TEST_CASE("manager: free returns everything; cached blocks evict tail first") {
  KvCacheManager kv(6, 4);
  run_prompt(kv, 1, toks(0, 12));  // 3 full blocks, hashed
  run_prompt(kv, 2, toks(100, 5));  // 1 full + 1 partial
  auto t1 = kv.block_table(1);
  kv.free(1);
  kv.free(2);
  kv.free(3);  // unknown: no-op
  CHECK(kv.pool().num_in_use() == 0);
  CHECK(kv.pool().num_cached() == 4);
  CHECK(kv.pool().num_free() == 2);
  CHECK(kv.num_seqs() == 0);
  // three fresh blocks: 2 plain free, then the first evicted is seq 1's tail
  run_prompt(kv, 3, toks(500, 12));
  CHECK(kv.stats().evictions == 1);
  // seq 1's head blocks are still cached: the prefix finds 2 blocks
  CHECK(kv.peek_cached_tokens(toks(0, 12)) == 8);
  kv.check_invariants();
}

TEST_CASE("manager: usage and waste on a hand-computed case") {
  KvCacheManager kv(10, 4);
  auto s = kv.stats();
  CHECK(s.waste == 0);
  CHECK(s.usage == 0);
  run_prompt(kv, 1, toks(0, 10));  // 3 blocks, 12 slots, 10 filled
  s = kv.stats();
  CHECK(s.allocated_slots == 12);
  CHECK(s.filled_slots == 10);
  CHECK(s.waste == doctest::Approx(2.0 / 12));
  run_prompt(kv, 2, toks(100, 5));  // 2 blocks, 8 slots, 5 filled
  s = kv.stats();
  CHECK(s.used_blocks == 5);
  CHECK(s.usage == doctest::Approx(0.5));
  CHECK(s.waste == doctest::Approx(5.0 / 20));
  // a fork shares its blocks: slots are counted once
  kv.fork(1, 3);
  CHECK(kv.stats().waste == doctest::Approx(5.0 / 20));
  // capacity reserved ahead holds no token yet: waste
  REQUIRE(kv.ensure_capacity(2, 9));  // one more block
  s = kv.stats();
  CHECK(s.allocated_slots == 24);
  CHECK(s.waste == doctest::Approx(9.0 / 24));
  kv.check_invariants();
}

TEST_CASE("manager: a prompt gets blocks for its first chunk only; later chunks extend the table") {
  KvCacheManager kv(10, 4);
  auto a = toks(100, 10);
  CHECK(run_prompt(kv, 1, a) == 0);  // registers [100..103] [104..107]
  auto b = toks(100, 8);
  for (int i = 0; i < 14; ++i) b.push_back(500 + i);  // 22 tokens: 8 cached, 14 to compute
  auto c = kv.allocate_prompt(2, b, true, 5);          // first chunk: 5 tokens -> positions [8, 13)
  REQUIRE(c);
  CHECK(*c == 8);
  CHECK(kv.block_table(2).size() == 4);  // ceil(13 / 4), not ceil(22 / 4) = 6
  // 5 distinct blocks (2 shared, 1 of seq 1's tail, 2 of seq 2's chunk) = 20 slots; 10 tokens computed.
  CHECK(kv.stats().waste == doctest::Approx(0.5));
  kv.commit_tokens(2, b, 13);
  REQUIRE(kv.ensure_capacity(2, 22));  // the rest of the prompt
  CHECK(kv.block_table(2).size() == 6);
  kv.commit_tokens(2, b, 22);
  kv.check_invariants();
  // Without a limit the whole prompt is covered at once (a fresh prompt, nothing cached).
  auto d = kv.allocate_prompt(3, toks(900, 9));
  REQUIRE(d);
  CHECK(kv.block_table(3).size() == 3);
  CHECK_THROWS_AS((void)kv.allocate_prompt(4, toks(950, 3), true, 0), Error);
}

TEST_CASE("manager: rollback of rejected tokens frees their blocks and never hashes them") {
  KvCacheManager kv(16, 4);
  auto t = toks(200, 6);  // prompt: [200..203] [204 205]
  CHECK(run_prompt(kv, 1, t) == 0);
  kv.check_invariants();
  // Last verified token 205 at position 5 and then 5 drafts: positions [5, 11) computed in one step.
  const auto drafts = toks(900, 5);
  std::vector<int32_t> all = t;
  all.insert(all.end(), drafts.begin(), drafts.end());  // [200..203] [204 205 900 901] [902 903 904]
  REQUIRE(kv.ensure_capacity(1, 11));
  CHECK(kv.block_table(1).size() == 3);
  const int third = kv.block_table(1)[2];
  const int free_before = kv.num_available_blocks();
  // One draft accepted (901.. rejected): keep 7 tokens; the third block goes back to the pool.
  kv.truncate(1, 7);
  kv.check_invariants();
  CHECK(kv.block_table(1).size() == 2);
  CHECK(kv.num_available_blocks() == free_before + 1);
  CHECK(kv.pool().ref_count(third) == 0);
  CHECK_FALSE(kv.pool().is_hashed(third));
  std::vector<int32_t> kept(all.begin(), all.begin() + 7);
  kv.commit_tokens(1, kept, 7);
  kv.check_invariants();
  CHECK(kv.num_computed(1) == 7);
  // Only the first block is shareable: nothing of the rejected drafts is findable.
  CHECK(kv.peek_cached_tokens(all) == 4);
  // The correction token 77 lands at position 7 and completes the second block with accepted tokens.
  kept.push_back(77);
  REQUIRE(kv.ensure_capacity(1, 8));
  kv.commit_tokens(1, kept, 8);
  kv.check_invariants();
  CHECK(kv.peek_cached_tokens(all) == 4);  // 204 205 900 901 was never computed as a block
  kept.push_back(1);
  CHECK(kv.peek_cached_tokens(kept) == 8);  // 204 205 900 77 was
}

TEST_CASE("manager: a rollback into a hashed block copies it before the next write") {
  KvCacheManager kv(16, 4);
  auto t = toks(300, 8);  // two full blocks, both hashed once committed
  run_prompt(kv, 1, t);
  const int second = kv.block_table(1)[1];
  CHECK(kv.pool().is_hashed(second));
  CHECK(kv.take_pending_copies().empty());
  kv.truncate(1, 6);  // positions 6, 7 will be written again (other tokens)
  kv.check_invariants();
  CHECK(kv.num_computed(1) == 6);
  CHECK(kv.block_table(1).size() == 2);
  REQUIRE(kv.ensure_capacity(1, 8));
  const int copy = kv.block_table(1)[1];
  CHECK(copy != second);  // the hashed block keeps its content (cached, still findable) ...
  CHECK(kv.pool().is_cached(second));
  CHECK(kv.peek_cached_tokens(toks(300, 9)) == 8);
  const auto copies = kv.take_pending_copies();  // ... and the private copy starts from it
  REQUIRE(copies.size() == 1);
  CHECK(copies[0] == std::pair<int, int>{second, copy});
  auto u = toks(300, 6);
  u.push_back(1);
  u.push_back(2);
  kv.commit_tokens(1, u, 8);
  kv.check_invariants();
  CHECK(kv.peek_cached_tokens(u) == 7);  // found (the new block), all but the last token
  u.push_back(3);
  CHECK(kv.peek_cached_tokens(u) == 8);
}

TEST_CASE("manager: a rollback in a forked sequence leaves the other holder's blocks alone") {
  KvCacheManager kv(16, 4);
  auto t = toks(400, 6);
  run_prompt(kv, 1, t);
  kv.fork(1, 2);
  const auto parent = kv.block_table(1);
  REQUIRE(kv.ensure_capacity(2, 10));  // the child writes positions [6, 10): its shared block is copied
  CHECK(kv.block_table(2)[1] != parent[1]);
  CHECK(kv.block_table(2).size() == 3);
  kv.truncate(2, 7);
  kv.check_invariants();
  CHECK(kv.block_table(2).size() == 2);
  CHECK(kv.block_table(1) == parent);
  CHECK(kv.pool().ref_count(parent[1]) == 1);
  CHECK(kv.pool().ref_count(parent[0]) == 2);
  kv.truncate(2, 3);  // back into the block both hold: the next write copies it
  kv.check_invariants();
  CHECK(kv.num_computed(2) == 3);
  REQUIRE(kv.ensure_capacity(2, 4));
  CHECK(kv.block_table(2)[0] != parent[0]);
  CHECK(kv.pool().ref_count(parent[0]) == 1);
  kv.free(2);
  kv.free(1);
  kv.check_invariants();
  CHECK(kv.pool().num_in_use() == 0);
}

// Sliding window W = 6, block size 4: a sequence that has computed c tokens keeps blocks from
// (c - 5) / 4 on; the next token at c reads keys (c - 6, c].
TEST_CASE("manager: a sliding window releases the blocks it passed, and a hit needs only its window") {
  KvCacheManager kv(8, 4, true, false, 6);
  CHECK(kv.window() == 6);
  CHECK(kv.first_needed_block(5) == 0);
  CHECK(kv.first_needed_block(9) == 1);
  CHECK(kv.max_blocks_held(1000, 4) == 4);  // blocks_for(6 + 4) + 1, not 250
  CHECK(kv.max_blocks_held(6, 4) == 2);
  const auto a = toks(100, 14);  // blocks [100..103] [104..107] [108..111] [112 113]
  CHECK(run_prompt(kv, 1, a) == 0);
  // 14 computed: the next token reads from 9 on, so block 0 (positions 0-3) and block 1 (4-7) go
  const std::vector<int32_t>& t = kv.block_table(1);
  REQUIRE(t.size() == 4);
  CHECK(t[0] == KvCacheManager::kDropped);
  CHECK(t[1] == KvCacheManager::kDropped);
  CHECK(t[2] >= 0);
  CHECK(kv.pool().num_in_use() == 2);
  CHECK(kv.pool().num_cached() == 2);  // hashed: still findable
  CHECK_THROWS_AS((void)kv.slot(1, 7), Error);  // never read again
  CHECK(kv.slot(1, 8) == t[2] * 4);
  CHECK_THROWS_AS(kv.truncate(1, 10), Error);  // position 10 would read key 5, released
  kv.truncate(1, 13);                          // reads from key 8 on: fine
  kv.check_invariants();
  kv.free(1);
  kv.check_invariants();

  // The same prompt again: all three full blocks are cached, so the hit is 12 tokens, and the blocks
  // before its window (12 - 6 = 6: block 1 on) are not taken; block 0 stays in the cache unused.
  const int cached_before = kv.pool().num_cached();
  auto c = kv.allocate_prompt(2, a);
  REQUIRE(c);
  CHECK(*c == 12);
  const std::vector<int32_t>& u = kv.block_table(2);
  CHECK(u[0] == KvCacheManager::kDropped);
  CHECK(u[1] >= 0);
  CHECK(u[2] >= 0);
  CHECK(kv.pool().num_cached() == cached_before - 2);
  kv.check_invariants();
  REQUIRE(kv.ensure_capacity(2, 14));
  kv.commit_tokens(2, a, 14);
  CHECK(kv.block_table(2)[1] == KvCacheManager::kDropped);  // released once 14 are computed
  kv.check_invariants();

  // A hit whose early blocks were evicted still counts when its window's blocks are there.
  KvCacheManager w(8, 4, true, false, 6);
  CHECK(run_prompt(w, 1, a) == 0);
  w.free(1);
  // evict: fill the pool with another prompt's blocks (the LRU's oldest, block 0 of `a`, goes first)
  auto other = toks(500, 4);
  REQUIRE(w.allocate_prompt(3, other));
  for (int n = 8; w.pool().stats().evictions == 0; n += 4) REQUIRE(w.ensure_capacity(3, n));
  CHECK(w.pool().stats().evictions == 1);
  CHECK(w.peek_cached_tokens(a) == 12);  // blocks 1 and 2 are what a 12-token hit reads
  CHECK(w.cached_blocks(a, 2) == 0);     // a hit of 8 or 4 tokens would read block 0: gone
  w.check_invariants();
}

TEST_CASE("manager: without prefix caching a window still releases, and forks share released entries") {
  KvCacheManager kv(10, 4, false, false, 5);
  const auto a = toks(1, 12);
  CHECK(run_prompt(kv, 1, a) == 0);
  CHECK(kv.block_table(1)[0] == KvCacheManager::kDropped);  // 12 computed: reads from 8 on
  CHECK(kv.block_table(1)[1] == KvCacheManager::kDropped);
  kv.fork(1, 2);
  CHECK(kv.block_table(2)[1] == KvCacheManager::kDropped);
  CHECK(kv.pool().ref_count(kv.block_table(1)[2]) == 2);
  REQUIRE(kv.ensure_capacity(2, 13));
  kv.commit_tokens(2, toks(1, 13), 13);
  kv.check_invariants();
  kv.free(1);
  kv.free(2);
  CHECK(kv.pool().num_in_use() == 0);
  kv.check_invariants();
}
