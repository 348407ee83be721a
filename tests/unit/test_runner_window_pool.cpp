// The ModelRunner with the sliding-window layers' KV in a pool of their own (KvCacheLayout of two
// groups): steps give the same logits, bit for bit, as with one pool for every layer, while the
// window tables hold only the blocks the window reads (-1 for the others, never dereferenced), with
// multi-token steps and with a padded (graph) decode.
#include <doctest/doctest.h>

#include <cstring>

#include "engine/backend/backend.h"
#include "engine/model/random_checkpoint.h"
#include "engine/model/registry.h"
#include "engine/runner/model_runner.h"
#include "tiny_config.h"

using namespace llmctl;

namespace {
constexpr int B = 4, W = 6;

// One sequence computes tokens [start, end) over `table` (full pool) and `window_table` (the window
// pool, or empty for one pool); logits of every new token.
BatchPlan step(int start, int end, const std::vector<int32_t>& table, const std::vector<int32_t>& window_table,
               int vocab) {
  BatchPlan p;
  for (int pos = start; pos < end; ++pos) {
    p.token_ids.push_back((5 * pos + 3) % vocab);
    p.positions.push_back(pos);
    p.slot_mapping.push_back(table[size_t(pos / B)] * B + pos % B);
    if (!window_table.empty()) p.window_slot_mapping.push_back(window_table[size_t(pos / B)] * B + pos % B);
    p.logits_rows.push_back(pos - start);
  }
  p.query_start = {0, end - start};
  p.context_len = {end};
  p.block_table = table;
  p.max_blocks_per_seq = int(table.size());
  if (!window_table.empty()) {
    p.window_block_table = window_table;
    p.window_max_blocks_per_seq = int(window_table.size());
  }
  return p;
}
}  // namespace

TEST_CASE("runner: sliding layers in a pool of their own read only their window, with the same logits") {
  ModelConfig c = test::tiny_llama_config(50, 3);
  c.sliding_window = W;
  c.sliding_layers = {true, false, true};
  auto be = make_cpu_backend(1);
  std::unique_ptr<Model> m = make_model(random_checkpoint(c, 7, 0.3f), *be);
  const std::vector<int32_t> table = {0, 1, 2, 3, 4, 5};

  auto run = [&](bool two_pools, bool padded_decode) {
    ModelRunner r(*m);
    r.alloc_kv_cache(r.kv_spec(B), two_pools ? KvCacheLayout({8, 4}, {0, W}) : KvCacheLayout(8));
    std::vector<float> out;
    auto keep = [&](const Tensor& lg, int rows) {
      out.insert(out.end(), lg.ptr<float>(), lg.ptr<float>() + rows * c.vocab_size);
    };
    // prefill 10 tokens (window blocks 0-2 of the small pool), then 4 more reading from key 8 on (the
    // window pool's block 0, positions 0-3, released: -1), then one decode at 14 (keys 9-14)
    const std::vector<int32_t> w1 = two_pools ? std::vector<int32_t>{0, 1, 2} : std::vector<int32_t>{};
    keep(r.execute(step(0, 10, {0, 1, 2}, w1, c.vocab_size)), 10);
    const std::vector<int32_t> w2 = two_pools ? std::vector<int32_t>{-1, 1, 2, 3} : std::vector<int32_t>{};
    keep(r.execute(step(10, 14, {0, 1, 2, 3}, w2, c.vocab_size)), 4);
    const std::vector<int32_t> w3 = two_pools ? std::vector<int32_t>{-1, -1, 2, 3} : std::vector<int32_t>{};
    BatchPlan d = step(14, 15, {0, 1, 2, 3}, w3, c.vocab_size);
    if (padded_decode) d = pad_decode_plan(d, 4, 16, B, 8, two_pools ? 4 : -1);
    keep(r.execute(d), 1);
    // the window pool's block 0 is free again: another sequence's tokens overwrite it
    if (two_pools) CHECK_NOTHROW(r.execute(step(0, 3, {5}, {0}, c.vocab_size)));
    keep(r.execute(step(15, 16, {0, 1, 2, 3}, w3, c.vocab_size)), 1);
    return out;
  };
  const std::vector<float> one = run(false, false);
  for (bool padded : {false, true}) {
    CAPTURE(padded);
    const std::vector<float> two = run(true, padded);
    REQUIRE(two.size() == one.size());
    CHECK(std::memcmp(one.data(), two.data(), one.size() * 4) == 0);
  }

  // A plan that reads a released block, or that lacks (or brings) window tables, is refused.
  ModelRunner r(*m);
  r.alloc_kv_cache(r.kv_spec(B), KvCacheLayout({8, 4}, {0, W}));
  CHECK_THROWS_AS(r.execute(step(0, 10, {0, 1, 2}, {-1, 1, 2}, c.vocab_size)), Error);
  CHECK_THROWS_AS(r.execute(step(0, 10, {0, 1, 2}, {}, c.vocab_size)), Error);
  CHECK_THROWS_AS(r.execute(step(0, 10, {0, 1, 2}, {0, 1, 9}, c.vocab_size)), Error);  // past the small pool
  ModelRunner one_pool(*m);
  one_pool.alloc_kv_cache(one_pool.kv_spec(B), 8);
  CHECK_THROWS_AS(one_pool.execute(step(0, 10, {0, 1, 2}, {0, 1, 2}, c.vocab_size)), Error);
  // a pool for one window only
  CHECK_THROWS_AS(r.alloc_kv_cache(r.kv_spec(B), KvCacheLayout({8, 4}, {0, W + 1})), Error);
}
