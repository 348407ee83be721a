// Weight loading stages (engine/model/weights/load_weights.h) and Backend::linear over a
// LinearWeight on the CPU backend: the name map's fusions, pack and upload (dtype, refusals by
// format name), and sharded linears against the full one on random inputs: column-parallel
// outputs reassembled equal the full output, row-parallel partial outputs summed equal it (f32).
// Quantized linears (Checkpoint::quantized): the canonical form the pack stage makes (F16/F32
// scales), fused and sharded slices against the dense ones, and the dense fallbacks with reasons.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <string>

#include "engine/backend/backend.h"
#include "engine/core/error.h"
#include "engine/model/check_tensors.h"
#include "engine/model/llama/llama_tensors.h"
#include "engine/model/random_checkpoint.h"
#include "engine/model/llama/llama_weight_map.h"
#include "engine/model/weights/load_weights.h"
#include "engine/model/weights/megatron_split.h"
#include "engine/model/weights/shard.h"
#include "quant/format/half_float.h"
#include "quant_load_util.h"
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

  CHECK(be->caps().supports(WeightFormat::DenseF32));
  CHECK(be->caps().supports(WeightFormat::DenseF16));
  CHECK(be->caps().supports(WeightFormat::DenseBF16));
  CHECK(be->caps().supports(WeightFormat::Int4Group));  // the CPU backend runs them (test_qlinear.cpp)
  CHECK(be->caps().supports(WeightFormat::Int8Group));
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

// ---- quantized linears (Checkpoint::quantized): canonical form, fusing, sharding, fallbacks ----

namespace {

quant::GroupAffineWeight random_group_affine(int bits, int64_t n, int64_t k, int group, uint32_t seed,
                                             bool f16_exact) {
  std::mt19937 rng(seed);
  quant::GroupAffineWeight w;
  w.bits = bits, w.n = n, w.k = k, w.group = group;
  for (int64_t i = 0; i < n * k; ++i) w.codes.push_back(uint8_t(bits == 4 ? rng() % 16 : rng() % 256));
  std::uniform_real_distribution<float> u(-0.05f, 0.05f);
  for (int64_t i = 0; i < n * w.groups(); ++i) {
    float s = u(rng), o = u(rng);
    if (f16_exact) s = quant::half_bits_to_f32(quant::f32_to_half_bits(s)), o = quant::half_bits_to_f32(quant::f32_to_half_bits(o));
    w.scale.push_back(s);
    w.offset.push_back(o);
  }
  return w;
}

// ck with every linear of `layer` moved from its dense tensors into ck.quantized (random codes).
void quantize_layer(Checkpoint& ck, int layer, int bits, int group) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  uint32_t seed = 100;
  for (const char* m : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                        "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}) {
    const std::string name = p + m + ".weight";
    const Tensor& t = ck.get(name);
    ck.quantized[name] = random_group_affine(bits, t.dim(0), t.dim(1), group, ++seed, true);
    ck.tensors.erase(name);
  }
}

Tensor dequantized(const quant::GroupAffineWeight& w) {
  const std::vector<float> v = quant::dequantize(w);
  Tensor t = Tensor::empty_host(DType::F32, {w.n, w.k});
  std::memcpy(t.data, v.data(), v.size() * 4);
  return t;
}

}  // namespace

TEST_CASE("quantized pack stage: canonical U8 codes [N, K], scales/offsets F16 only when every value is exact") {
  for (int bits : {4, 8}) {
    CAPTURE(bits);
    quant::GroupAffineWeight w = random_group_affine(bits, 6, 64, 32, 3, true);
    ShardSpec spec;
    spec.world = 1;
    LinearWeight lw = pack_quantized_linear(w, spec);
    CHECK(lw.format == (bits == 4 ? WeightFormat::Int4Group : WeightFormat::Int8Group));
    CHECK(lw.n == 6);
    CHECK(lw.k == 64);
    CHECK(lw.group_size == 32);
    REQUIRE(lw.data.dtype == DType::U8);
    REQUIRE(lw.data.shape == std::vector<int64_t>{6, 64});
    CHECK(std::memcmp(lw.data.data, w.codes.data(), w.codes.size()) == 0);
    CHECK(lw.scales.dtype == DType::F16);
    CHECK(lw.zeros.dtype == DType::F16);
    CHECK(lw.scales.shape == std::vector<int64_t>{6, 2});
    CHECK(std::memcmp(test::dequantize_canonical(lw).data, dequantized(w).data, 6 * 64 * 4) == 0);
    // One offset that f16 does not hold exactly: both scales and offsets F32, values unchanged.
    w.offset[5] = 0.1f;
    lw = pack_quantized_linear(w, spec);
    CHECK(lw.scales.dtype == DType::F32);
    CHECK(lw.zeros.dtype == DType::F32);
    CHECK(std::memcmp(test::dequantize_canonical(lw).data, dequantized(w).data, 6 * 64 * 4) == 0);
  }
  CHECK(quantized_group_supported(16, 64));
  CHECK(quantized_group_supported(64, 128));
  CHECK_FALSE(quantized_group_supported(8, 64));
  CHECK_FALSE(quantized_group_supported(48, 96));
  CHECK_FALSE(quantized_group_supported(64, 96));
  CHECK_FALSE(quantized_group_supported(16, 48));  // K not whole blocks of 32
}

TEST_CASE("quantized shard stage: fused and split slices hold the dense slices' values, splits cutting a group too") {
  Checkpoint ck = random_checkpoint(small_gqa(false), 21, 0.2f);
  quantize_layer(ck, 0, 4, 32);
  const ModelConfig& c = ck.config;
  const auto all = llama_weight_sources(c);
  for (int world : {1, 2, 4}) {
    CAPTURE(world);
    for (const char* name : {"layers.0.qkv", "layers.0.gate_up", "layers.0.o", "layers.0.down"}) {
      CAPTURE(name);
      const WeightSource& src = source(all, name);
      const ShardSpec spec = megatron_shard(src.role, c, world - 1, world);
      std::string why;
      const bool row_split = src.role == WeightRole::O || src.role == WeightRole::Down;
      const int64_t k = src.role == WeightRole::O ? c.hidden_size : c.intermediate_size;
      const auto q = gather_quantized_shard(ck, src, spec, &why);
      REQUIRE_MESSAGE(q.has_value(), why);
      // o: K 64 over 4 ranks, down: K 96 over 2 or 4 cut groups of 32: the rank's part of a group
      // keeps the group's scale, in groups of the largest size that fits
      if (row_split) CHECK(q->group == std::gcd(int64_t(32), k / world));
      // gather_shard dequantizes the parts first, then slices: the same values.
      const Tensor dense = gather_shard(ck, src, spec);
      REQUIRE(dense.shape == std::vector<int64_t>{q->n, q->k});
      CHECK(std::memcmp(dequantized(*q).data, dense.data, dense.nbytes()) == 0);
    }
  }
  // A fused weight with one dense part is not fused quantized: load_linear takes it dense and says why.
  Checkpoint mixed = ck;
  const std::string v_proj = "model.layers.0.self_attn.v_proj.weight";
  mixed.tensors[v_proj] = dequantized(mixed.quantized.at(v_proj).weight());
  mixed.quantized.erase("model.layers.0.self_attn.v_proj.weight");
  std::string why;
  CHECK_FALSE(gather_quantized_shard(mixed, source(all, "layers.0.qkv"), ShardSpec{}, &why).has_value());
  CHECK(why.find("v_proj.weight' is dense") != std::string::npos);
  test::CanonicalRecordingBackend rec;
  std::vector<std::string> fallbacks;
  const LinearWeight qkv = load_linear(mixed, source(all, "layers.0.qkv"), ShardSpec{}, DType::F32, rec, &fallbacks);
  CHECK(qkv.format == WeightFormat::DenseF32);
  REQUIRE(fallbacks.size() == 1);
  CHECK(fallbacks[0].find("layers.0.qkv: ") == 0);
  CHECK(rec.uploaded.empty());
}

TEST_CASE("quantized load_linear: canonical on a backend with the format; dense, with the reason, otherwise") {
  Checkpoint ck = random_checkpoint(small_gqa(false), 22, 0.2f);
  quantize_layer(ck, 1, 8, 32);
  const auto all = llama_weight_sources(ck.config);
  const WeightSource& gate_up = source(all, "layers.1.gate_up");
  const Tensor want = gather_shard(ck, gate_up, ShardSpec{});  // the dequantized values, f32

  test::CanonicalRecordingBackend rec;
  std::vector<std::string> fallbacks;
  const LinearWeight on_rec = load_linear(ck, gate_up, ShardSpec{}, DType::BF16, rec, &fallbacks);
  CHECK(fallbacks.empty());
  REQUIRE(rec.uploaded.size() == 1);
  CHECK(rec.uploaded[0].format == WeightFormat::Int8Group);
  CHECK(rec.uploaded[0].n == 2 * ck.config.intermediate_size);
  CHECK(std::memcmp(test::dequantize_canonical(rec.uploaded[0]).data, want.data, want.nbytes()) == 0);
  CHECK(on_rec.n == rec.uploaded[0].n);

  // The CPU backend (no quantized kernels yet): dense in the weight dtype, the dequantized values.
  auto cpu = make_cpu_backend(1);
  if (!cpu->caps().supports(WeightFormat::Int8Group)) {
    const LinearWeight dense = load_linear(ck, gate_up, ShardSpec{}, DType::F32, *cpu, &fallbacks);
    CHECK(dense.format == WeightFormat::DenseF32);
    CHECK(std::memcmp(dense.data.data, want.data, want.nbytes()) == 0);
    REQUIRE(fallbacks.size() == 1);
    CHECK(fallbacks[0].find("does not run int8-group weights") != std::string::npos);
  }

  // Groups the kernels do not take (8 inputs): dense, with the reason.
  Checkpoint g8 = random_checkpoint(small_gqa(false), 23, 0.2f);
  quantize_layer(g8, 0, 4, 8);
  fallbacks.clear();
  const LinearWeight d8 = load_linear(g8, source(all, "layers.0.down"), ShardSpec{}, DType::F32, rec, &fallbacks);
  CHECK(d8.format == WeightFormat::DenseF32);
  REQUIRE(fallbacks.size() == 1);
  CHECK(fallbacks[0].find("groups of 8 inputs") != std::string::npos);
  CHECK(rec.uploaded.size() == 1);  // nothing more uploaded quantized
  // The default Backend::upload_quantized refuses by name.
  const quant::GroupAffineWeight& first8 = g8.quantized.begin()->second.weight();
  CHECK(error_of([&] { (void)cpu->Backend::upload_quantized(pack_quantized_linear(first8, {})); })
            .find("int4-group") != std::string::npos);
}

TEST_CASE("a checkpoint consumed by one model: a whole single part is moved out of its entry, fused parts moved through") {
  Checkpoint ck = random_checkpoint(small_gqa(false), 25, 0.2f);
  quantize_layer(ck, 0, 4, 32);
  const Checkpoint fresh = ck;  // read without consuming: the copies gather_quantized_shard makes
  ck.release_after_upload = true;
  const auto all = llama_weight_sources(ck.config);
  std::string why;
  const std::string down_name = "model.layers.0.mlp.down_proj.weight";
  const WeightSource& down = source(all, "layers.0.down");
  const uint8_t* held = ck.quantized.at(down_name).weight().codes.data();
  const auto want = gather_quantized_shard(fresh, down, ShardSpec{}, &why);
  const auto got = gather_quantized_shard(ck, down, ShardSpec{}, &why);
  REQUIRE(want.has_value());
  REQUIRE(got.has_value());
  CHECK(got->codes.data() == held);  // moved, not copied
  CHECK(ck.quantized.at(down_name).released());
  CHECK(got->codes == want->codes);
  CHECK(got->scale == want->scale);
  CHECK(got->offset == want->offset);
  CHECK_THROWS_WITH((void)gather_quantized_shard(ck, down, ShardSpec{}, &why),
                    doctest::Contains("already loaded and released"));
  // A rank's slice of two is decoded or selected as before: the entry stays for the other rank.
  const WeightSource& gate_up = source(all, "layers.0.gate_up");
  const ShardSpec half = megatron_shard(gate_up.role, ck.config, 0, 2);
  const auto mine = gather_quantized_shard(ck, gate_up, half, &why);
  REQUIRE(mine.has_value());
  CHECK(mine->codes == gather_quantized_shard(fresh, gate_up, half, &why)->codes);
  CHECK_FALSE(ck.quantized.at("model.layers.0.mlp.gate_proj.weight").released());
  // Fused parts: their join is the loader's own, moved through the whole shard.
  const auto qkv = gather_quantized_shard(ck, source(all, "layers.0.qkv"), ShardSpec{}, &why);
  REQUIRE(qkv.has_value());
  CHECK(qkv->codes == gather_quantized_shard(fresh, source(all, "layers.0.qkv"), ShardSpec{}, &why)->codes);

  // A part taken and then refused by the backend (groups of 8): the dense fallback dequantizes
  // the taken weight, the values gather_shard gives an unconsumed checkpoint.
  Checkpoint g8 = random_checkpoint(small_gqa(false), 26, 0.2f);
  quantize_layer(g8, 0, 4, 8);
  const Tensor dense_want = gather_shard(g8, down, ShardSpec{});
  g8.release_after_upload = true;
  test::CanonicalRecordingBackend rec;
  std::vector<std::string> fallbacks;
  const LinearWeight d8 = load_linear(g8, down, ShardSpec{}, DType::F32, rec, &fallbacks);
  CHECK(d8.format == WeightFormat::DenseF32);
  REQUIRE(fallbacks.size() == 1);
  CHECK(fallbacks[0].find("groups of 8 inputs") != std::string::npos);
  REQUIRE(d8.data.shape == dense_want.shape);
  CHECK(std::memcmp(d8.data.data, dense_want.data, dense_want.nbytes()) == 0);
  CHECK(g8.quantized.at(down_name).released());
}

TEST_CASE("check_checkpoint_tensors covers linears kept quantized: shapes, consistency, dense and quantized at once, extras") {
  Checkpoint ck = random_checkpoint(small_gqa(false), 24, 0.2f);
  quantize_layer(ck, 0, 4, 32);
  CHECK(check_checkpoint_tensors(ck).empty());
  auto refused = [&](Checkpoint bad, const std::string& needle) {
    CHECK(error_of([&] { (void)check_checkpoint_tensors(bad); }).find(needle) != std::string::npos);
  };
  const std::string q = "model.layers.0.self_attn.q_proj.weight";
  Checkpoint wrong = ck;
  wrong.quantized[q] = random_group_affine(4, 32, 64, 32, 1, true);  // 32 rows, the config says 64
  refused(wrong, q + " (quantized) has shape [32, 64], expected [64, 64]");
  Checkpoint broken = ck;
  broken.quantized[q].weight().scale.pop_back();
  refused(broken, q + " (quantized): group-affine scale/offset: size does not match");
  Checkpoint both = ck;
  both.tensors[q] = Tensor::zeros_host(DType::F32, {64, 64});
  refused(both, q + " is both dense and quantized");
  Checkpoint extra = ck;
  extra.quantized["model.layers.9.mlp.up_proj.weight"] = ck.quantized.at(q);
  refused(extra, "has no place for: model.layers.9.mlp.up_proj.weight (quantized)");
}
