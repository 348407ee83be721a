// The decode-graph padding policy of the ModelRunner: buckets, the graph context, which plans
// replay a graph; and a padded decode step gives the same logits as the unpadded one.
#include <doctest/doctest.h>

#include <cstring>

#include "engine/backend/backend.h"
#include "engine/model/random_checkpoint.h"
#include "engine/model/registry.h"
#include "engine/runner/decode_graphs.h"
#include "engine/runner/model_runner.h"
#include "tiny_config.h"

using namespace llmctl;

namespace {
// S decode sequences, sequence s at position 5 + s, its blocks s*2, s*2+1.
BatchPlan decode_plan(int S, int B) {
  BatchPlan p;
  p.max_blocks_per_seq = 2;
  for (int s = 0; s < S; ++s) {
    const int pos = 5 + s;
    p.token_ids.push_back(1 + s);
    p.positions.push_back(pos);
    p.slot_mapping.push_back((2 * s) * B + pos % B);
    p.query_start.push_back(s + 1);
    p.context_len.push_back(pos + 1);
    p.block_table.insert(p.block_table.end(), {2 * s, 2 * s + 1});
    p.logits_rows.push_back(s);
  }
  return p;
}
}  // namespace

TEST_CASE("decode graphs: buckets and context") {
  CHECK(decode_graph_bucket(1) == 1);
  CHECK(decode_graph_bucket(3) == 4);
  CHECK(decode_graph_bucket(17) == 24);
  CHECK(decode_graph_bucket(256) == 256);
  CHECK(decode_graph_bucket(257) == 0);
  BatchPlan p = decode_plan(3, 16);
  CHECK(decode_graph_context(p, 16) == 512);  // at least 512 tokens
  p.context_len[0] = 700;
  CHECK(decode_graph_context(p, 16) == 1024);  // 44 blocks -> 64 blocks
  CHECK(graphable_decode(decode_plan(3, 16)));
  BatchPlan rows = decode_plan(3, 16);
  rows.logits_rows = {0, 2};
  CHECK_FALSE(graphable_decode(rows));
  BatchPlan prefill = decode_plan(2, 16);
  prefill.token_ids.push_back(3);
  prefill.positions.push_back(7);
  prefill.slot_mapping.push_back(2 * 16 + 7);
  prefill.query_start = {0, 1, 3};
  CHECK_FALSE(graphable_decode(prefill));
}

TEST_CASE("decode graphs: a padded decode step equals the unpadded one") {
  const ModelConfig c = test::tiny_llama_config();
  auto be = make_cpu_backend(1);
  std::unique_ptr<Model> m = make_model(random_checkpoint(c, 4, 0.3f), *be);
  const int B = 16, S = 3;
  auto run = [&](bool padded) {
    ModelRunner r(*m);
    r.alloc_kv_cache(r.kv_spec(B), 64);
    // Fill positions [0, pos] of each sequence by one prefill, then decode the last token.
    BatchPlan d = decode_plan(S, B);
    BatchPlan pre;
    pre.max_blocks_per_seq = 2;
    for (int s = 0; s < S; ++s) {
      for (int p = 0; p < d.positions[s]; ++p) {
        pre.token_ids.push_back((7 * p + s) % c.vocab_size);
        pre.positions.push_back(p);
        pre.slot_mapping.push_back(d.block_table[2 * s] * B + p);
      }
      pre.query_start.push_back(pre.num_tokens());
      pre.context_len.push_back(d.positions[s]);
      pre.block_table.insert(pre.block_table.end(), {d.block_table[2 * s], d.block_table[2 * s + 1]});
    }
    r.execute(pre);
    if (padded) d = pad_decode_plan(d, decode_graph_bucket(S), decode_graph_context(d, B), B, 64);
    Tensor lg = r.execute(d);
    return std::vector<float>(lg.ptr<float>(), lg.ptr<float>() + S * c.vocab_size);
  };
  const std::vector<float> plain = run(false), padded = run(true);
  CHECK(std::memcmp(plain.data(), padded.data(), plain.size() * 4) == 0);
}
