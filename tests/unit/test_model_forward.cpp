// The decoder forward on the CPU backend with a tiny random model: batching and chunking never
// change a sequence's logits (bit for bit), and copy_blocks copies KV blocks.
#include <doctest/doctest.h>

#include <cstring>
#include <random>

#include "engine/backend/backend.h"
#include "engine/model/checkpoint.h"
#include "engine/model/random_checkpoint.h"
#include "engine/model/registry.h"
#include "engine/runner/model_runner.h"
#include "tiny_config.h"

using namespace llmctl;

namespace {

Checkpoint tiny_checkpoint(uint32_t seed) {
  ModelConfig c = test::tiny_llama_config(101, 2, 16);
  return random_checkpoint(c, seed, 0.3f);
}

struct Seq {
  std::vector<int32_t> tokens;
  std::vector<int32_t> blocks;  // physical block ids
};

// One step over several sequences: sequence s runs tokens [begin[s], end[s]) and yields logits of
// its last token.
Tensor run(ModelRunner& m, const std::vector<Seq>& seqs, const std::vector<int>& begin,
           const std::vector<int>& end, int B) {
  BatchPlan plan;
  size_t mb = 0;
  for (auto& s : seqs) mb = std::max(mb, s.blocks.size());
  plan.max_blocks_per_seq = int(mb);
  for (size_t s = 0; s < seqs.size(); ++s) {
    for (int p = begin[s]; p < end[s]; ++p) {
      plan.token_ids.push_back(seqs[s].tokens[p]);
      plan.positions.push_back(p);
      plan.slot_mapping.push_back(seqs[s].blocks[p / B] * B + p % B);
    }
    plan.query_start.push_back(plan.num_tokens());
    plan.context_len.push_back(end[s]);
    for (size_t i = 0; i < mb; ++i) plan.block_table.push_back(i < seqs[s].blocks.size() ? seqs[s].blocks[i] : -1);
    plan.logits_rows.push_back(plan.num_tokens() - 1);
  }
  Tensor logits = m.execute(plan);
  return convert_host(logits, DType::F32);  // a copy: the next step overwrites the buffer
}

}  // namespace

TEST_CASE("a sequence's logits are bit-identical alone, in a batch, and with chunked prefill") {
  Checkpoint ck = tiny_checkpoint(7);
  auto backend = make_cpu_backend(2);
  std::unique_ptr<Model> model = make_model(ck, *backend);
  const int B = 16, V = ck.config.vocab_size;
  std::mt19937 rng(3);
  Seq a{{}, {0, 1, 2}}, b{{}, {5, 3, 4, 6}};
  for (int i = 0; i < 37; ++i) a.tokens.push_back(int32_t(rng() % V));
  for (int i = 0; i < 50; ++i) b.tokens.push_back(int32_t(rng() % V));

  ModelRunner kv(*model);  // two runners on one model, each with its own cache
  kv.alloc_kv_cache(kv.kv_spec(B), 8);
  Tensor solo_a = run(kv, {a}, {0}, {37}, B);
  Tensor solo_b = run(kv, {b}, {0}, {50}, B);
  // Together, with b's prompt in two chunks (the second chunk reads the first from the cache).
  ModelRunner kv2(*model);
  kv2.alloc_kv_cache(kv2.kv_spec(B), 8);
  run(kv2, {b}, {0}, {20}, B);
  Tensor both = run(kv2, {a, b}, {0, 20}, {37, 50}, B);
  CHECK(std::memcmp(both.ptr<float>(), solo_a.ptr<float>(), V * 4) == 0);
  CHECK(std::memcmp(both.ptr<float>() + V, solo_b.ptr<float>(), V * 4) == 0);
  // A decode step after prefill equals the prefill of the longer prompt.
  Tensor decode = run(kv2, {a}, {36}, {37}, B);
  CHECK(std::memcmp(decode.ptr<float>(), solo_a.ptr<float>(), V * 4) == 0);
  bool finite = true, varied = false;
  for (int i = 0; i < V; ++i) {
    finite &= std::isfinite(solo_a.ptr<float>()[i]);
    varied |= solo_a.ptr<float>()[i] != solo_a.ptr<float>()[0];
  }
  CHECK(finite);
  CHECK(varied);
}

TEST_CASE("copy_blocks copies whole KV blocks in every layer") {
  Checkpoint ck = tiny_checkpoint(9);
  auto backend = make_cpu_backend(1);
  std::unique_ptr<Model> model = make_model(ck, *backend);
  const int B = 16;
  Seq a{{}, {2, 5}};
  for (int i = 0; i < 20; ++i) a.tokens.push_back(i + 1);
  ModelRunner runner(*model);
  runner.alloc_kv_cache(runner.kv_spec(B), 6);
  std::vector<KvLayer>& kv = runner.kv_cache();
  run(runner, {a}, {0}, {20}, B);
  backend->copy_blocks(kv, {{2, 0}, {5, 3}});
  const size_t block = kv[0].k.nbytes() / size_t(kv[0].k.dim(0));  // 6 blocks + the scratch block
  for (auto& l : kv)
    for (Tensor* t : {&l.k, &l.v}) {
      const char* base = static_cast<const char*>(t->data);
      CHECK(std::memcmp(base + 0 * block, base + 2 * block, block) == 0);
      CHECK(std::memcmp(base + 3 * block, base + 5 * block, block) == 0);
    }
  // The copied blocks serve as the sequence's cache: same logits from the copies.
  Tensor orig = run(runner, {a}, {19}, {20}, B);
  Seq copy{a.tokens, {0, 3}};
  Tensor from_copy = run(runner, {copy}, {19}, {20}, B);
  CHECK(std::memcmp(orig.ptr<float>(), from_copy.ptr<float>(), ck.config.vocab_size * 4) == 0);
}
