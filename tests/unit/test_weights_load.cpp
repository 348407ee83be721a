// Weight loading stages (engine/model/weights/load_weights.h) and Backend::linear over a
// LinearWeight on the CPU backend: the name map's fusions, pack and upload (dtype, refusals by
// format name), and sharded linears against the full one on random inputs: column-parallel
// outputs reassembled equal the full output, row-parallel partial outputs summed equal it (f32).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>

#include "engine/backend/backend.h"
#include "engine/core/error.h"
#include "engine/model/random_checkpoint.h"
#include "engine/model/weights/llama_weight_map.h"
#include "engine/model/weights/load_weights.h"
#include "engine/model/weights/megatron_split.h"
#include "engine/model/weights/shard.h"
#include "tiny_config.h"

using namespace llmctl;

namespace {

ModelConfig small_gqa(bool tied) {
  ModelConfig c = test::tiny_llama_config(100, 2, 16);
  c.max_position_embeddings = 64;
  c.tie_word_embeddings = tied;
  return c;
}

const WeightSource& source(const std::vector<WeightSource>& all, const std::string& name) {
  for (const WeightSource& s : all)
    if (s.name == name) return s;
  FAIL("no weight source " << name);
  return all.front();
}

Tensor random_host(std::vector<int64_t> shape, uint32_t seed) {
  Tensor t = Tensor::empty_host(DType::F32, std::move(shape));
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = d(rng);
  return t;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

// |a - b| <= atol + rtol * |b| everywhere (f32 sums in a different order).
void check_close(const Tensor& a, const Tensor& b, float atol, float rtol) {
  REQUIRE(a.shape == b.shape);
  int bad = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const float x = a.ptr<float>()[i], y = b.ptr<float>()[i];
    if (!(std::fabs(x - y) <= atol + rtol * std::fabs(y))) ++bad;
  }
  CHECK(bad == 0);
}

Tensor run_linear(Backend& be, const Tensor& x, const LinearWeight& w) {
  Tensor out = be.alloc(DType::F32, {x.dim(0), w.n});
  be.linear(x, w, nullptr, out);
  return out;
}

// Places rank outputs [T, n_r] of a column-parallel linear into the full output's columns.
Tensor gather_columns(const std::vector<Tensor>& outs, int64_t N, const ShardSpec& spec) {
  const int64_t T = outs[0].dim(0);
  Tensor full = Tensor::zeros_host(DType::F32, {T, N});
  for (int r = 0; r < spec.world; ++r) {
    ShardSpec sr = spec;
    sr.rank = r;
    int64_t local = 0;
    for (const ShardSegment& s : shard_segments(N, sr)) {
      for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < s.length; ++j)
          full.ptr<float>()[t * N + s.begin + j] = outs[r].ptr<float>()[t * outs[r].dim(1) + local + j];
      local += s.length;
    }
  }
  return full;
}

}  // namespace

TEST_CASE("name map: the Llama family's HF names, with q/k/v and gate/up fused") {
  ModelConfig c = small_gqa(true);
  c.attention_bias = true;
  const auto all = llama_weight_sources(c);
  CHECK(all.size() == 3 + 2 * 7);
  const WeightSource& qkv = source(all, "layers.1.qkv");
  CHECK(qkv.role == WeightRole::Qkv);
  CHECK(qkv.layer == 1);
  CHECK(qkv.parts == std::vector<std::string>{"model.layers.1.self_attn.q_proj.weight",
                                              "model.layers.1.self_attn.k_proj.weight",
                                              "model.layers.1.self_attn.v_proj.weight"});
  CHECK(source(all, "layers.0.qkv_bias").parts.back() == "model.layers.0.self_attn.v_proj.bias");
  CHECK(source(all, "layers.0.gate_up").parts ==
        std::vector<std::string>{"model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight"});
  const WeightSource& head = source(all, "lm_head");
  CHECK(head.tied);
  CHECK(head.parts == std::vector<std::string>{"model.embed_tokens.weight"});
  CHECK(is_linear_role(WeightRole::GateUp));
  CHECK_FALSE(is_linear_role(WeightRole::Embed));

  // Every tensor the checkpoint holds is used by exactly one logical weight (untied: lm_head too).
  const Checkpoint ck = random_checkpoint(small_gqa(false), 3, 0.1f);
  std::map<std::string, int> uses;
  for (const WeightSource& s : llama_weight_sources(ck.config))
    for (const std::string& p : s.parts) ++uses[p];
  CHECK(uses.size() == ck.tensors.size());
  for (const auto& [name, n] : uses) {
    CAPTURE(name);
    CHECK(ck.has(name));
    CHECK(n == 1);
  }
}

TEST_CASE("shard stage: a missing checkpoint tensor is named") {
  Checkpoint ck = random_checkpoint(small_gqa(false), 4, 0.1f);
  ck.tensors.erase("model.layers.0.self_attn.k_proj.weight");
  const auto all = llama_weight_sources(ck.config);
  const WeightSource& qkv = source(all, "layers.0.qkv");
  CHECK(error_of([&] { (void)gather_shard(ck, qkv, ShardSpec{}); }).find("model.layers.0.self_attn.k_proj.weight") !=
        std::string::npos);
}

TEST_CASE("pack and upload stages: dense weights in the weight dtype; malformed quantized ones refused by name") {
  auto be = make_cpu_backend(1);
  const Tensor host = random_host({24, 16}, 5);
  const LinearWeight packed = pack_linear(host, ShardSpec{}, WeightFormat::DenseBF16);
  CHECK(packed.n == 24);
  CHECK(packed.k == 16);
  const LinearWeight up = upload_linear(packed, *be);
  CHECK(up.format == WeightFormat::DenseBF16);
  REQUIRE(up.data.dtype == DType::BF16);
  CHECK(std::memcmp(up.data.data, convert_host(host, DType::BF16).data, up.data.nbytes()) == 0);

  CHECK(be->supports(WeightFormat::DenseF32));
  CHECK(be->supports(WeightFormat::DenseF16));
  CHECK(be->supports(WeightFormat::DenseBF16));
  CHECK(be->supports(WeightFormat::Int4Group));  // the CPU backend runs them (test_qlinear.cpp)
  CHECK(be->supports(WeightFormat::Int8Group));
  CHECK(error_of([&] { (void)pack_linear(host, ShardSpec{}, WeightFormat::Int4Group); }).find("int4-group") !=
        std::string::npos);
  LinearWeight q = packed;  // bf16 data, no scales, no group: not a quantized weight
  q.format = WeightFormat::Int8Group;
  CHECK_THROWS_WITH((void)upload_linear(q, *be), doctest::Contains("int8-group"));
  Tensor x = random_host({3, 16}, 6), out = be->alloc(DType::F32, {3, 24});
  CHECK_THROWS_WITH(be->linear(x, q, nullptr, out), doctest::Contains("int8-group"));
}

TEST_CASE("Backend::linear over a LinearWeight equals the tensor overload, bit for bit") {
  auto be = make_cpu_backend(2);
  const Checkpoint ck = random_checkpoint(small_gqa(false), 7, 0.2f);
  const auto all = llama_weight_sources(ck.config);
  const WeightSource& gu = source(all, "layers.0.gate_up");
  for (DType dt : {DType::F32, DType::F16, DType::BF16}) {
    CAPTURE(dtype_name(dt));
    const LinearWeight w = load_linear(ck, gu, ShardSpec{}, dt, *be);
    CHECK(w.format == dense_format(dt));
    CHECK(w.n == 2 * ck.config.intermediate_size);
    CHECK(w.k == ck.config.hidden_size);
    const Tensor x = random_host({5, w.k}, 8);
    Tensor a = run_linear(*be, x, w), b = be->alloc(DType::F32, {5, w.n});
    be->linear(x, w.data, nullptr, b);
    CHECK(std::memcmp(a.data, b.data, a.nbytes()) == 0);
  }
}

TEST_CASE("sharded linears on the CPU backend: column outputs concatenate, row partials sum, to the full output") {
  auto be = make_cpu_backend(2);
  const Checkpoint ck = random_checkpoint(small_gqa(false), 9, 0.2f);
  const ModelConfig& c = ck.config;
  const auto all = llama_weight_sources(c);
  const int64_t T = 7;
  for (int world : {2, 4}) {  // 4: the 2 KV heads are replicated
    CAPTURE(world);
    // Column-parallel: qkv, gate_up, lm_head (vocab-parallel logits).
    for (const char* name : {"layers.0.qkv", "layers.1.gate_up", "lm_head"}) {
      CAPTURE(name);
      const WeightSource& src = source(all, name);
      const LinearWeight full = load_linear(ck, src, ShardSpec{}, DType::F32, *be);
      const Tensor x = random_host({T, full.k}, 10);
      std::vector<Tensor> outs;
      for (int r = 0; r < world; ++r)
        outs.push_back(run_linear(*be, x, load_linear(ck, src, megatron_shard(src.role, c, r, world), DType::F32, *be)));
      CHECK(outs[0].dim(1) < full.n);
      check_close(gather_columns(outs, full.n, megatron_shard(src.role, c, 0, world)), run_linear(*be, x, full), 1e-5f,
                  1e-5f);
    }
    // Row-parallel: o and down take the matching columns of x (the column-parallel outputs) and sum.
    for (const char* name : {"layers.0.o", "layers.1.down"}) {
      CAPTURE(name);
      const WeightSource& src = source(all, name);
      const LinearWeight full = load_linear(ck, src, ShardSpec{}, DType::F32, *be);
      const Tensor x = random_host({T, full.k}, 11);
      Tensor sum = Tensor::zeros_host(DType::F32, {T, full.n});
      for (int r = 0; r < world; ++r) {
        const ShardSpec spec = megatron_shard(src.role, c, r, world);
        const LinearWeight w = load_linear(ck, src, spec, DType::F32, *be);
        CHECK(w.k == full.k / world);
        const Tensor part = run_linear(*be, shard_slice(x, spec), w);
        for (int64_t i = 0; i < sum.numel(); ++i) sum.ptr<float>()[i] += part.ptr<float>()[i];
      }
      check_close(sum, run_linear(*be, x, full), 1e-4f, 1e-4f);
    }
  }
}

TEST_CASE("a tied lm_head wraps the uploaded embedding without a second copy") {
  auto be = make_cpu_backend(1);
  const Checkpoint ck = random_checkpoint(small_gqa(true), 12, 0.2f);
  const auto all = llama_weight_sources(ck.config);
  const Tensor embed = load_tensor(ck, source(all, "embed"), ShardSpec{}, DType::BF16, *be);
  const LinearWeight head = dense_linear(embed);
  CHECK(head.format == WeightFormat::DenseBF16);
  CHECK(head.data.data == embed.data);
  CHECK(head.n == ck.config.vocab_size);
  CHECK(head.k == ck.config.hidden_size);
}
