// fp8 KV cache value offsets (engine/model/kv_value_offsets.h): the side file round-trips, a
// malformed one is refused with the file named, load_kv_scales takes the file's value scales and
// offsets, the runner uploads them, and the engine's fp8 cache stores v - offset and adds it back
// (with large offsets, a cache that forgot either half would be far off the exact model).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>

#include "engine/core/error.h"
#include "engine/model/kv_scales.h"
#include "engine/model/kv_value_offsets.h"
#include "engine_test_util.h"
#include "format_test_util.h"

using namespace llmctl;
using namespace llmctl::test;

namespace {

// Per-head k/v scales in the checkpoint (as compressed-tensors stores them) for every layer.
void add_scales(Checkpoint& ck, float k, float v) {
  for (int i = 0; i < ck.config.num_layers; ++i)
    for (auto [name, s] : {std::pair{"k_scale", k}, {"v_scale", v}}) {
      Tensor t = Tensor::empty_host(DType::F32, {ck.config.num_kv_heads});
      for (int h = 0; h < ck.config.num_kv_heads; ++h) t.ptr<float>()[h] = s * float(h + 1);
      ck.tensors["model.layers." + std::to_string(i) + ".self_attn." + name] = t;
    }
}

// Each layer's file entry: scale 0.01 * (layer + 1) per head, offsets offset + 0.001 * index.
std::vector<KvValueOffsets> offsets_for(const ModelConfig& c, float offset) {
  std::vector<KvValueOffsets> out(size_t(c.num_layers));
  for (int i = 0; i < c.num_layers; ++i) {
    out[size_t(i)].v_scale.assign(size_t(c.num_kv_heads), 0.01f * float(i + 1));
    for (int j = 0; j < c.num_kv_heads * c.head_dim; ++j) out[size_t(i)].v_offset.push_back(offset + 0.001f * float(j));
  }
  return out;
}

}  // namespace

TEST_CASE("kv value offsets: the side file round-trips and load_kv_scales uses it") {
  const ModelConfig c = tiny_llama_config(50, 2);  // 2 kv heads
  ScratchDir dir("kv_value_offsets");
  Checkpoint ck = random_checkpoint(c, 4, 0.3f);
  ck.hf_dir = dir.path.string();
  add_scales(ck, 0.5f, 0.25f);
  CHECK(load_kv_scales(ck)[1].v_offset.empty());  // no file: scales only

  const std::vector<KvValueOffsets> want = offsets_for(c, -0.7f);
  const std::string file = dir.file(kKvValueOffsetsFile);
  write_text(file, kv_value_offsets_json(want, c.num_kv_heads, c.head_dim).dump());
  const std::vector<KvValueOffsets> got = read_kv_value_offsets(file, c);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i].v_scale == want[i].v_scale);
    CHECK(got[i].v_offset == want[i].v_offset);  // floats survive the text exactly
  }
  const std::vector<KvScales> s = load_kv_scales(ck);
  REQUIRE(s.size() == size_t(c.num_layers));
  CHECK(s[1].k == std::vector<float>{0.5f, 1.0f});  // keys: the checkpoint's
  CHECK(s[1].v == want[1].v_scale);                 // values: the file's (for the centered values)
  CHECK(s[1].v_offset == want[1].v_offset);

  auto be = make_cpu_backend(1);
  std::unique_ptr<Model> m = make_model(ck, *be);
  LocalExecutor ex(*m, KvCacheDtype::Fp8);
  ex.alloc_kv_cache(ex.kv_spec(16), 4);
  const KvLayer& l1 = ex.runner().kv_cache()[1];
  REQUIRE(l1.v_offset.shape == std::vector<int64_t>{c.num_kv_heads, c.head_dim});
  CHECK(l1.v_offset.ptr<float>()[c.head_dim + 3] == want[1].v_offset[size_t(c.head_dim + 3)]);
  CHECK(l1.v_scale.ptr<float>()[0] == want[1].v_scale[0]);
  LocalExecutor ex8(*m, KvCacheDtype::Int8);  // int8 caches are per token already: no offsets
  ex8.alloc_kv_cache(ex8.kv_spec(16), 4);
  CHECK(ex8.runner().kv_cache()[1].v_offset.empty());

  Checkpoint bare = random_checkpoint(c, 4, 0.3f);  // the file without scales to go with it
  bare.hf_dir = dir.path.string();
  CHECK_THROWS_AS(load_kv_scales(bare), InputError);
}

TEST_CASE("kv value offsets: a malformed side file is refused, naming it") {
  const ModelConfig c = tiny_llama_config(50, 2);
  ScratchDir dir("kv_value_offsets_bad");
  const std::string file = dir.file(kKvValueOffsetsFile);
  const nlohmann::json good = kv_value_offsets_json(offsets_for(c, 0.2f), c.num_kv_heads, c.head_dim);
  using Edit = std::function<void(nlohmann::json&)>;
  const std::vector<std::pair<const char*, Edit>> edits = {
      {"format", [](nlohmann::json& j) { j["format"] = "something else"; }},
      {"no format", [](nlohmann::json& j) { j.erase("format"); }},
      {"version", [](nlohmann::json& j) { j["version"] = 2; }},
      {"version type", [](nlohmann::json& j) { j["version"] = "1"; }},
      {"layers", [&](nlohmann::json& j) { j["num_layers"] = c.num_layers + 1; }},
      {"heads", [&](nlohmann::json& j) { j["num_kv_heads"] = 1; }},
      {"head dim", [&](nlohmann::json& j) { j["head_dim"] = c.head_dim * 2; }},
      {"a layer missing", [](nlohmann::json& j) { j["layers"].erase(1); }},
      {"a layer not an object", [](nlohmann::json& j) { j["layers"][0] = 3; }},
      {"zero scale", [](nlohmann::json& j) { j["layers"][1]["v_scale"][0] = 0.0; }},
      {"negative scale", [](nlohmann::json& j) { j["layers"][1]["v_scale"][1] = -1.0; }},
      {"scale past f32", [](nlohmann::json& j) { j["layers"][1]["v_scale"][1] = 1e39; }},
      {"string scale", [](nlohmann::json& j) { j["layers"][0]["v_scale"][0] = "0.1"; }},
      {"short scales", [](nlohmann::json& j) { j["layers"][0]["v_scale"].erase(0); }},
      {"short offset row", [](nlohmann::json& j) { j["layers"][0]["v_offset"][1].erase(5); }},
      {"missing offset row", [](nlohmann::json& j) { j["layers"][0]["v_offset"].erase(0); }},
      {"offset past f32", [](nlohmann::json& j) { j["layers"][0]["v_offset"][1][2] = -1e300; }},
      {"null offset", [](nlohmann::json& j) { j["layers"][0]["v_offset"][0][0] = nullptr; }},
      {"nested offset", [](nlohmann::json& j) { j["layers"][0]["v_offset"][0][0] = nlohmann::json::array({1.0}); }},
  };
  write_text(file, good.dump());
  CHECK(read_kv_value_offsets(file, c).size() == size_t(c.num_layers));
  for (const auto& [what, edit] : edits) {
    nlohmann::json j = good;
    edit(j);
    write_text(file, j.dump());
    INFO(what);
    try {
      read_kv_value_offsets(file, c);
      FAIL("accepted");
    } catch (const InputError& e) {
      CHECK(std::string(e.what()).find(kKvValueOffsetsFile) != std::string::npos);
    }
  }
  for (const char* text : {"", "{", "[1, 2]", "{\"format\": \"llmctl.kv_cache_value_offsets\"}",
                           "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"}) {
    write_text(file, text);
    INFO(text);
    CHECK_THROWS_AS(read_kv_value_offsets(file, c), InputError);
  }
}

TEST_CASE("engine: an fp8 cache with value offsets stores v - offset and adds it back") {
  // Offsets of about 0.5 on values of about 1, with the values' scales: a cache that subtracted
  // them but did not add them back (or the reverse) is off by 0.5 in every value. Measured: mean
  // |dlogprob| 0.55 as built, 1.06 without the add, 1.14 without the subtraction.
  TinyModel m;
  ScratchDir dir("kv_value_offsets_engine");
  Checkpoint ck = m.checkpoint;
  ck.hf_dir = dir.path.string();
  add_scales(ck, 0.02f, 0.02f);
  std::vector<KvValueOffsets> off = offsets_for(ck.config, 0.5f);
  for (KvValueOffsets& l : off) l.v_scale.assign(l.v_scale.size(), 0.02f);
  write_text(dir.file(kKvValueOffsetsFile), kv_value_offsets_json(off, ck.config.num_kv_heads, ck.config.head_dim).dump());
  std::unique_ptr<Model> model = make_model(ck, *m.backend);
  REQUIRE(!model->kv_scales().at(0).v_offset.empty());

  Scorer exact(m.new_executor(), m.tokenizer);
  LocalExecutor with_offsets(*model, KvCacheDtype::Fp8);
  Scorer quant(with_offsets, m.tokenizer);
  const std::vector<int> text = prompt_of(60, 5);
  const std::vector<double> a = exact.target_logprobs(text, 1), b = quant.target_logprobs(text, 1);
  double worst = 0, mean = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i])), mean += std::fabs(a[i] - b[i]);
  mean /= double(a.size());
  MESSAGE("fp8 KV with value offsets 0.5: |dlogprob| mean " << mean << ", max " << worst);
  CHECK(worst > 0);
  CHECK(mean < 0.75);
}
