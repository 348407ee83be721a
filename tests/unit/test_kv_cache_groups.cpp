// KvCacheGroups: a full-attention pool and a sliding-window pool behind one set of calls; the
// grouping of a model's layers and the sizing of the pools. Block size 4.
#include <doctest/doctest.h>

#include <climits>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/kv/kv_cache_groups.h"
#include "engine/kv/kv_cache_spec.h"
#include "token_runs.h"

using namespace llmctl;

using test::toks;

TEST_CASE("groups: layers group by window; one window per model") {
  CHECK(kv_group_windows({0, 0, 0}) == std::vector<int>{0});
  CHECK(kv_group_windows({512, 512}) == std::vector<int>{512});
  CHECK(kv_group_windows({512, 512, 512, 512, 512, 0}) == std::vector<int>{0, 512});
  CHECK_THROWS_AS(kv_group_windows({512, 0, 1024}), Error);
}

TEST_CASE("groups: the sliding pool gets what its sequences can hold at once, the full pool the rest") {
  // Two layers of each kind, 1 KiB a layer's block: a single pool of 1 MiB would be 256 blocks.
  const std::vector<int> w = {0, 64};
  const std::vector<int> b = kv_group_blocks(w, {2048, 2048}, 1 << 20, 16, 4, 32);
  // 4 sequences x (64 / 16 + 2) + 32 / 16 = 26 sliding blocks; the rest of the bytes go to the full pool
  REQUIRE(b.size() == 2);
  CHECK(b[1] == 26);
  CHECK(b[1] == kv_window_peak_blocks(64, 16, 4, 32));
  CHECK(b[0] == ((1 << 20) - 26 * 2048) / 2048);
  // Too little memory for the peak: never fewer blocks than one pool for every layer would have.
  const std::vector<int> small = kv_group_blocks(w, {2048, 2048}, 40 * 4096, 16, 4, 32);
  CHECK(small[1] == 26);
  const std::vector<int> tiny = kv_group_blocks(w, {2048, 2048}, 20 * 4096, 16, 4, 32);
  CHECK(tiny[1] == 20);
  CHECK(tiny[0] == 20);
  CHECK(kv_group_blocks({0}, {4096}, 1 << 20, 16, 4, 32) == std::vector<int>{256});
  CHECK(kv_group_blocks({64}, {4096}, 1 << 20, 16, 4, 32) == std::vector<int>{256});
}

TEST_CASE("groups: every call reaches both pools; a hit is one both can use") {
  KvCacheGroups kv({20, 8}, {0, 6}, 4);
  REQUIRE(kv.num_groups() == 2);
  std::string why;
  CHECK(kv.can_hold(80, 4));  // the full pool holds 20 blocks, the window pool blocks_for(6 + 4) + 1
  CHECK_FALSE(kv.can_hold(84, 4, &why));
  CHECK(why.find("20") != std::string::npos);
  CHECK_FALSE(kv.can_hold(40, 40, &why));  // a 40-token step needs 13 blocks of the window pool
  CHECK(why.find("sliding-window") != std::string::npos);

  const auto a = toks(100, 14);
  auto c = kv.allocate_prompt(1, a);
  REQUIRE(c);
  CHECK(*c == 0);
  REQUIRE(kv.ensure_capacity(1, 14));
  kv.commit_tokens(1, a, 14);
  CHECK(kv.block_table(1, 0)[0] >= 0);                         // the full pool keeps everything
  CHECK(kv.block_table(1, 1)[0] == KvCacheManager::kDropped);  // the window pool does not
  kv.check_invariants();
  kv.free(1);

  // Same prompt: 3 cached full blocks in the full pool; the window pool has blocks 1 and 2 -> 12 tokens
  CHECK(kv.peek_cached_tokens(a) == 12);
  c = kv.allocate_prompt(2, a);
  REQUIRE(c);
  CHECK(*c == 12);
  CHECK(kv.group(0).num_computed(2) == 12);
  CHECK(kv.group(1).num_computed(2) == 12);
  kv.check_invariants();

  // All or nothing: the window pool runs dry first, and the full pool takes nothing either.
  const int full_free = kv.group(0).num_available_blocks();
  REQUIRE(kv.allocate_prompt(3, toks(900, 4)));
  int n = 4;
  while (kv.ensure_capacity(3, n + 4)) n += 4;
  CHECK(kv.group(1).blocks_to_ensure(3, n + 4) > kv.group(1).num_available_blocks());
  CHECK(kv.group(0).num_available_blocks() > 0);
  CHECK(kv.group(0).block_table(3).size() == kv.group(1).block_table(3).size());
  CHECK(kv.group(0).num_available_blocks() < full_free);
  CHECK_FALSE(kv.allocate_prompt(4, toks(700, 12)).has_value());
  CHECK_FALSE(kv.group(0).has(4));
  kv.check_invariants();

  // Copies come per pool.
  kv.free(3);
  kv.fork(2, 5);
  REQUIRE(kv.ensure_capacity(5, 15));
  const auto copies = kv.take_pending_copies();
  REQUIRE(copies.size() == 2);
  kv.check_invariants();
}

TEST_CASE("groups: a window as large as an int holds (from a config) counts without overflow") {
  KvCacheManager m(10, 16, true, false, INT_MAX);
  CHECK(m.max_blocks_held(100, 512) == m.blocks_for(100));
  CHECK(m.first_needed_block(1000) == 0);
  CHECK(kv_window_peak_blocks(INT_MAX, 16, 256, 8192) == 1 << 30);
  KvCacheSpec spec = make_kv_cache_spec(KvCacheDtype::Auto, DType::F32, 16, 2, 1, 8);
  CHECK(describe_kv_cache(spec, KvCacheLayout({4, 4}, {0, INT_MAX}), {1, 1}).find("up to 2147483664 tokens") !=
        std::string::npos);
}

TEST_CASE("groups: the layout of several pools describes each") {
  KvCacheSpec spec = make_kv_cache_spec(KvCacheDtype::Auto, DType::BF16, 16, 34, 4, 256);
  // Gemma-3-4B: 34 layers, 5 of them global, a 1024-token window; 4 KiB a layer and token in bf16
  const std::string d = describe_kv_cache(spec, KvCacheLayout({2048, 300}, {0, 1024}), {5, 29});
  CHECK(d.find("2048 blocks = 32768 tokens for the 5 full-attention layers (20.0 KiB a token)") != std::string::npos);
  CHECK(d.find("the 29 sliding-window layers (window 1024) keep 300 blocks") != std::string::npos);
  CHECK(d.find("116.0 KiB a token, up to 1040 tokens a sequence") != std::string::npos);
  CHECK(describe_kv_cache(spec, KvCacheLayout(100), {34}) == describe_kv_cache(spec, 100));
}
