// Tensor-parallel sharding of weights (engine/model/weights/shard.h, megatron_split.h): a random
// GQA checkpoint split 2 and 4 ways by the Megatron plan reassembles to the original for every
// weight; slices are checked against independently picked rows/columns; sizes that do not divide
// are refused with the numbers.
#include <doctest/doctest.h>

#include <cstring>
#include <functional>
#include <random>
#include <string>

#include "engine/core/error.h"
#include "engine/model/random_checkpoint.h"
#include "engine/model/llama/llama_weight_map.h"
#include "engine/model/weights/load_weights.h"
#include "engine/model/weights/megatron_split.h"
#include "engine/model/weights/shard.h"

using namespace llmctl;

namespace {

// GQA (Hq 4 > Hkv 2), untied lm_head and qkv bias so that every role appears; the vocabulary and
// intermediate size divide by 4.
ModelConfig gqa_config() {
  ModelConfig c;
  c.hidden_size = 48;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.intermediate_size = 40;
  c.vocab_size = 52;
  c.max_position_embeddings = 64;
  c.tie_word_embeddings = false;
  c.attention_bias = true;
  return c;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype == b.dtype && a.shape == b.shape && std::memcmp(a.data, b.data, a.nbytes()) == 0;
}

// Rows [r0, r0 + n) of a host f32 [R, C] tensor.
std::vector<float> rows_of(const Tensor& t, int64_t r0, int64_t n) {
  const int64_t C = t.rank() == 1 ? 1 : t.dim(1);
  return std::vector<float>(t.ptr<float>() + r0 * C, t.ptr<float>() + (r0 + n) * C);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

// Every weight of the config's checkpoint sliced `world` ways and reassembled equals the fused full
// weight, byte for byte; returns how many weights were not replicated (so the split was exercised).
int check_roundtrip(const Checkpoint& ck, int world) {
  int split = 0;
  for (const WeightSource& src : llama_weight_sources(ck.config)) {
    CAPTURE(src.name);
    const Tensor full = gather_shard(ck, src, ShardSpec{});
    std::vector<Tensor> slices;
    for (int r = 0; r < world; ++r) slices.push_back(gather_shard(ck, src, megatron_shard(src.role, ck.config, r, world)));
    const ShardSpec spec = megatron_shard(src.role, ck.config, 0, world);
    if (spec.kind != ShardKind::Replicated) {
      ++split;
      CHECK(slices[0].numel() < full.numel());
    }
    CHECK(same_bytes(shard_reassemble(slices, spec), full));
  }
  return split;
}

}  // namespace

TEST_CASE("a random GQA checkpoint sharded 2 ways by the Megatron split reassembles to the original") {
  const Checkpoint ck = random_checkpoint(gqa_config(), 11, 0.5f);
  // embed, lm_head, and per layer qkv, qkv_bias, o, gate_up, down
  CHECK(check_roundtrip(ck, 2) == 2 + 2 * 5);
}

TEST_CASE("sharded 4 ways, the 2 KV heads are replicated: rank r holds kv head r / 2") {
  const Checkpoint ck = random_checkpoint(gqa_config(), 12, 0.5f);
  CHECK(check_roundtrip(ck, 4) == 2 + 2 * 5);
  const ModelConfig& c = ck.config;
  const int64_t D = c.head_dim;
  const WeightSource qkv = llama_weight_sources(c)[5];  // embed, final_norm, lm_head, in/post norm, qkv
  REQUIRE(qkv.name == "layers.0.qkv");
  const Tensor& q = ck.get(qkv.parts[0]);
  const Tensor& k = ck.get(qkv.parts[1]);
  const Tensor& v = ck.get(qkv.parts[2]);
  for (int r = 0; r < 4; ++r) {
    CAPTURE(r);
    const Tensor s = gather_shard(ck, qkv, megatron_shard(WeightRole::Qkv, c, r, 4));
    REQUIRE(s.shape == std::vector<int64_t>{3 * D, c.hidden_size});
    CHECK(rows_of(s, 0, D) == rows_of(q, r * D, D));           // query head r
    CHECK(rows_of(s, D, D) == rows_of(k, (r / 2) * D, D));     // kv head r / 2
    CHECK(rows_of(s, 2 * D, D) == rows_of(v, (r / 2) * D, D));
  }
}

TEST_CASE("each rank's qkv slice is a GQA layout: its query heads read the KV heads they read unsharded") {
  // (Hq, Hkv, world): KV split, KV replicated, MHA, one KV head.
  const int cases[][3] = {{4, 2, 2}, {4, 2, 4}, {8, 2, 4}, {8, 8, 4}, {4, 1, 2}, {12, 4, 2}, {16, 2, 8}};
  for (const auto& [hq, hkv, world] : cases) {
    CAPTURE(hq);
    CAPTURE(hkv);
    CAPTURE(world);
    ModelConfig c = gqa_config();
    c.num_heads = hq;
    c.num_kv_heads = hkv;
    c.vocab_size = 64;  // divides by every world here
    REQUIRE_NOTHROW(check_tensor_parallel(c, world));
    const int64_t D = c.head_dim, rows = int64_t(hq + 2 * hkv) * D;
    for (int r = 0; r < world; ++r) {
      const std::vector<ShardSegment> segs = shard_segments(rows, megatron_shard(WeightRole::Qkv, c, r, world));
      REQUIRE(segs.size() == 3);
      const int64_t lq = segs[0].length / D, lkv = segs[1].length / D;
      REQUIRE(lq == hq / world);
      REQUIRE(lkv == std::max(1, hkv / world));
      CHECK(segs[1].begin - hq * D == segs[2].begin - (hq + hkv) * D);  // k and v: the same heads
      for (int64_t j = 0; j < lq; ++j) {
        const int64_t global_q = segs[0].begin / D + j;
        const int64_t global_kv = (segs[1].begin - hq * D) / D + j / (lq / lkv);  // local GQA grouping
        CHECK(global_kv == global_q / (hq / hkv));                                // unsharded grouping
      }
    }
  }
}

TEST_CASE("column slices hold their ranks' heads of each fused part; row slices hold their columns") {
  const Checkpoint ck = random_checkpoint(gqa_config(), 13, 0.5f);
  const ModelConfig& c = ck.config;
  const int64_t D = c.head_dim, H = c.hidden_size, I = c.intermediate_size;
  const std::string p = "model.layers.1.";
  for (int r = 0; r < 2; ++r) {
    CAPTURE(r);
    // qkv: [q heads 2r, 2r+1 | kv head r | kv head r]
    WeightSource qkv{"qkv", WeightRole::Qkv, 1, {p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight", p + "self_attn.v_proj.weight"}};
    const Tensor s = gather_shard(ck, qkv, megatron_shard(WeightRole::Qkv, c, r, 2));
    REQUIRE(s.shape == std::vector<int64_t>{4 * D, H});
    CHECK(rows_of(s, 0, 2 * D) == rows_of(ck.get(qkv.parts[0]), 2 * r * D, 2 * D));
    CHECK(rows_of(s, 2 * D, D) == rows_of(ck.get(qkv.parts[1]), r * D, D));
    CHECK(rows_of(s, 3 * D, D) == rows_of(ck.get(qkv.parts[2]), r * D, D));
    // gate_up: [gate rows of r | up rows of r]
    WeightSource gu{"gate_up", WeightRole::GateUp, 1, {p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"}};
    const Tensor g = gather_shard(ck, gu, megatron_shard(WeightRole::GateUp, c, r, 2));
    REQUIRE(g.shape == std::vector<int64_t>{I, H});
    CHECK(rows_of(g, 0, I / 2) == rows_of(ck.get(gu.parts[0]), r * I / 2, I / 2));
    CHECK(rows_of(g, I / 2, I / 2) == rows_of(ck.get(gu.parts[1]), r * I / 2, I / 2));
    // down [H, I]: columns [r*I/2, (r+1)*I/2) of every row
    const Tensor& down = ck.get(p + "mlp.down_proj.weight");
    const Tensor d = gather_shard(ck, {"down", WeightRole::Down, 1, {p + "mlp.down_proj.weight"}},
                                  megatron_shard(WeightRole::Down, c, r, 2));
    REQUIRE(d.shape == std::vector<int64_t>{H, I / 2});
    for (int64_t row = 0; row < H; ++row)
      for (int64_t j = 0; j < I / 2; ++j)
        REQUIRE(d.ptr<float>()[row * (I / 2) + j] == down.ptr<float>()[row * I + r * I / 2 + j]);
  }
}

TEST_CASE("world 1 is replicated: a single-part weight is the checkpoint's own tensor, a fused one its parts in order") {
  const Checkpoint ck = random_checkpoint(gqa_config(), 14, 0.5f);
  for (const WeightSource& src : llama_weight_sources(ck.config)) {
    CAPTURE(src.name);
    const ShardSpec spec = megatron_shard(src.role, ck.config, 0, 1);
    CHECK(spec.kind == ShardKind::Replicated);
    if (src.parts.size() == 1) CHECK(gather_shard(ck, src, spec).data == ck.get(src.parts[0]).data);
    // A fused weight is its parts' rows in order (the layout the forward's qkv / gate_up expect).
    const Tensor full = gather_shard(ck, src, spec);
    int64_t row = 0;
    for (const std::string& part : src.parts) {
      const Tensor& t = ck.get(part);
      CHECK(rows_of(full, row, t.dim(0)) == rows_of(t, 0, t.dim(0)));
      row += t.dim(0);
    }
    CHECK(row == full.dim(0));
  }
}

TEST_CASE("tensor-parallel sizes that do not divide are refused with the numbers") {
  ModelConfig c = gqa_config();
  CHECK_NOTHROW(check_tensor_parallel(c, 1));
  CHECK_NOTHROW(check_tensor_parallel(c, 2));
  CHECK_NOTHROW(check_tensor_parallel(c, 4));  // KV heads replicated
  std::string e = error_of([&] { check_tensor_parallel(c, 3); });
  CHECK(e.find("4 query heads over 3") != std::string::npos);

  c.num_heads = 6;
  c.num_kv_heads = 3;
  e = error_of([&] { check_tensor_parallel(c, 2); });
  CHECK(e.find("3 key/value heads over 2") != std::string::npos);

  c = gqa_config();
  c.num_heads = 12;
  c.num_kv_heads = 3;  // fewer than 4 ranks, and 4 is not a multiple of 3
  e = error_of([&] { check_tensor_parallel(c, 4); });
  CHECK(e.find("cannot replicate 3 key/value heads over 4") != std::string::npos);

  c = gqa_config();
  c.intermediate_size = 42;
  e = error_of([&] { check_tensor_parallel(c, 4); });
  CHECK(e.find("42 MLP intermediate features over 4") != std::string::npos);

  c = gqa_config();
  c.vocab_size = 51;
  e = error_of([&] { check_tensor_parallel(c, 2); });
  CHECK(e.find("51 vocabulary entries over 2") != std::string::npos);

  e = error_of([&] { check_tensor_parallel(gqa_config(), 0); });
  CHECK(e.find("at least 1") != std::string::npos);
}

TEST_CASE("the default model's shapes (SmolLM2-135M: 9 query heads, 3 KV heads) split 3 ways, not 2 or 4") {
  ModelConfig c;
  c.hidden_size = 576;
  c.num_layers = 30;
  c.num_heads = 9;
  c.num_kv_heads = 3;
  c.head_dim = 64;
  c.intermediate_size = 1536;
  c.vocab_size = 49152;
  CHECK_NOTHROW(check_tensor_parallel(c, 3));
  CHECK(error_of([&] { check_tensor_parallel(c, 2); }).find("cannot split 9 query heads over 2") != std::string::npos);
  CHECK(error_of([&] { check_tensor_parallel(c, 4); }).find("cannot split 9 query heads over 4") != std::string::npos);
}

TEST_CASE("a row-parallel quantized weight split inside a group keeps the group's scale on each rank") {
  ShardSpec s;
  s.kind = ShardKind::Row;
  s.world = 2;
  s.parts = {{576, "hidden features"}};
  std::mt19937 rng(11);
  for (int group : {32, 64, 576}) {  // 288 columns a rank: 9 whole groups, 4.5 groups, half of one
    CAPTURE(group);
    quant::GroupAffineWeight w;
    w.bits = 4;
    w.n = 5;
    w.k = 576;
    w.group = group;
    std::uniform_int_distribution<int> code(0, 15);
    std::uniform_real_distribution<float> val(-1.f, 1.f);
    for (int64_t i = 0; i < w.n * w.k; ++i) w.codes.push_back(uint8_t(code(rng)));
    for (int64_t i = 0; i < w.n * w.groups(); ++i) {
      w.scale.push_back(val(rng));
      w.offset.push_back(val(rng));
    }
    const std::vector<float> whole = quant::dequantize(w);
    for (int r = 0; r < 2; ++r) {
      s.rank = r;
      const quant::GroupAffineWeight mine = shard_quantized(w, s);
      REQUIRE(mine.k == 288);
      CHECK(mine.group == (group == 32 ? 32 : group == 64 ? 32 : 288));
      CHECK_NOTHROW(mine.validate());
      const std::vector<float> d = quant::dequantize(mine);
      for (int64_t row = 0; row < w.n; ++row)
        for (int64_t c = 0; c < 288; ++c) CHECK(d[size_t(row * 288 + c)] == whole[size_t(row * 576 + r * 288 + c)]);
    }
  }
}

TEST_CASE("parts that do not add up to the split dimension are refused") {
  ShardSpec s;
  s.kind = ShardKind::Column;
  s.world = 2;
  s.head_size = 4;
  s.parts = {{2, "query heads"}, {2, "key/value heads", true}};
  Tensor t = Tensor::zeros_host(DType::F32, {20, 3});  // 4 heads of 4 rows would be 16
  const std::string e = error_of([&] { (void)shard_slice(t, s); });
  CHECK(e.find("add up to 16") != std::string::npos);
  CHECK(e.find("has 20") != std::string::npos);
}
