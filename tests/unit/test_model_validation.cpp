// A hostile or broken checkpoint is refused with a message naming the problem, before any kernel
// reads a weight: shapes against the config (norms of 1 or 0 elements, wrong o/down/gate/lm_head),
// missing tensors, a config promising more layers than the file has, attention_bias without
// biases, a zero-row q/k in a GGUF file; extra tensors are reported. convert fails likewise.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/backend/backend.h"
#include "engine/convert/convert.h"
#include "engine/core/error.h"
#include "engine/model/checkpoint.h"
#include "engine/model/llama/gguf_llama.h"
#include "engine/model/registry.h"
#include "engine/model/llama/llama_tensors.h"
#include "engine/model/random_checkpoint.h"
#include "engine/model/safetensors.h"
#include "format_test_util.h"

using namespace llmctl;
using namespace llmctl::test;
using nlohmann::json;

namespace {

// hidden 32, 4 heads of 8, 2 kv heads, 2 layers, ffn 64, vocab 16.
constexpr int H = 32, NH = 4, NKV = 2, HD = 8, FF = 64, V = 16, L = 2;

ModelConfig tiny_model_config() {
  ModelConfig c;
  c.hidden_size = H;
  c.num_layers = L;
  c.num_heads = NH;
  c.num_kv_heads = NKV;
  c.head_dim = HD;
  c.intermediate_size = FF;
  c.vocab_size = V;
  c.max_position_embeddings = 128;
  c.tie_word_embeddings = false;
  return c;
}

json tiny_config_json() {
  json j = tiny_model_config().to_hf_json();
  j["bos_token_id"] = nullptr;
  j["eos_token_id"] = nullptr;
  return j;
}

using Weights = std::vector<std::pair<std::string, Tensor>>;

Weights tiny_weights(const ModelConfig& c = tiny_model_config()) {
  Checkpoint ck = random_checkpoint(c, 7, 0.1f);
  return Weights(ck.tensors.begin(), ck.tensors.end());
}

void replace(Weights& w, const std::string& name, std::vector<int64_t> shape) {
  for (auto& [n, t] : w)
    if (n == name) t = Tensor::empty_host(DType::F32, std::move(shape));
}

void drop(Weights& w, const std::string& name) {
  std::erase_if(w, [&](const auto& p) { return p.first == name; });
}

// Writes config.json and model.safetensors into a fresh directory; returns the load error ("" when
// it loaded).
std::string load_error(const ScratchDir& dir, const json& config, const Weights& w) {
  write_text(dir.file("config.json"), config.dump());
  write_safetensors(dir.file("model.safetensors"), w);
  try {
    load_checkpoint(dir.path.string());
    return "";
  } catch (const InputError& e) {
    return e.what();
  }
}

bool has(const std::string& msg, const std::string& part) { return msg.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("model validation: the tensor list follows the config") {
  ModelConfig c = tiny_model_config();
  CHECK(llama_tensor_specs(c).size() == 2 + 9 * L + 1);
  c.attention_bias = true;
  auto specs = llama_tensor_specs(c);
  CHECK(specs.size() == 2 + 12 * L + 1);
  bool bias = false;
  for (auto& s : specs)
    if (s.name == "model.layers.1.self_attn.k_proj.bias") bias = s.shape == std::vector<int64_t>{NKV * HD};
  CHECK(bias);
  ScratchDir dir("mv_ok");
  CHECK(load_error(dir, tiny_config_json(), tiny_weights()) == "");
}

TEST_CASE("model validation: a norm weight of 1 or 0 elements is refused, also at the end of a page") {
  ScratchDir dir("mv_norm");
  for (int64_t n : {1, 0}) {
    CAPTURE(n);
    Weights w = tiny_weights();
    replace(w, "model.norm.weight", {n});
    std::string err = load_error(dir, tiny_config_json(), w);
    CHECK(has(err, "model.norm.weight has shape [" + std::to_string(n) + "], expected [32]"));
    replace(w, "model.layers.1.input_layernorm.weight", {n});
    CHECK(has(load_error(dir, tiny_config_json(), w), "model.layers.1.input_layernorm.weight"));
  }

  // The 1-element norm last in a file whose size is a multiple of the page size: without the shape
  // check the model reads 32 floats from a mapping that ends 4 bytes after the tensor starts.
  Weights w = tiny_weights();
  drop(w, "model.norm.weight");
  int64_t pad = 1000;
  for (int it = 0; it < 10; ++it) {
    Weights v = w;
    v.emplace_back("zz.pad", Tensor::empty_host(DType::U8, {pad}));
    v.emplace_back("model.norm.weight", Tensor::empty_host(DType::F32, {1}));
    write_safetensors(dir.file("model.safetensors"), v);
    const auto size = int64_t(std::filesystem::file_size(dir.file("model.safetensors")));
    if (size % 4096 == 0) break;
    pad += 4096 - size % 4096;
  }
  REQUIRE(std::filesystem::file_size(dir.file("model.safetensors")) % 4096 == 0);
  write_text(dir.file("config.json"), tiny_config_json().dump());
  CHECK_THROWS_WITH_AS(load_checkpoint(dir.path.string()), doctest::Contains("model.norm.weight has shape [1]"),
                       InputError);

  // The model itself checks too (checkpoints built in memory never pass through load_checkpoint).
  Checkpoint ck = random_checkpoint(tiny_model_config(), 1, 0.1f);
  ck.tensors["model.norm.weight"] = Tensor::empty_host(DType::F32, {1});
  auto be = make_cpu_backend(1);
  CHECK_THROWS_WITH_AS(make_model(ck, *be), doctest::Contains("model.norm.weight has shape [1], expected [32]"),
                       InputError);
}

TEST_CASE("model validation: missing tensors are named") {
  ScratchDir dir("mv_missing");
  Weights w = tiny_weights();
  drop(w, "model.norm.weight");
  std::string err = load_error(dir, tiny_config_json(), w);
  CHECK(has(err, "missing 1 tensor"));
  CHECK(has(err, "model.norm.weight"));
  w = tiny_weights();
  drop(w, "model.layers.0.mlp.up_proj.weight");
  drop(w, "model.layers.1.post_attention_layernorm.weight");
  err = load_error(dir, tiny_config_json(), w);
  CHECK(has(err, "missing 2 tensors"));
  CHECK(has(err, "model.layers.0.mlp.up_proj.weight"));
  CHECK(has(err, "model.layers.1.post_attention_layernorm.weight"));
}

TEST_CASE("model validation: wrong shapes of o/down/gate/lm_head give both shapes") {
  ScratchDir dir("mv_shape");
  struct Case {
    const char* name;
    std::vector<int64_t> shape;
    const char* want;
  };
  const Case cases[] = {
      {"model.layers.0.self_attn.o_proj.weight", {H, 16}, "o_proj.weight has shape [32, 16], expected [32, 32]"},
      {"model.layers.1.mlp.down_proj.weight", {H, 8}, "down_proj.weight has shape [32, 8], expected [32, 64]"},
      {"model.layers.1.mlp.gate_proj.weight", {8, H}, "gate_proj.weight has shape [8, 32], expected [64, 32]"},
      {"lm_head.weight", {V - 1, H}, "lm_head.weight has shape [15, 32], expected [16, 32]"},
      {"model.layers.0.self_attn.k_proj.weight", {NKV * HD, H, 1}, "k_proj.weight has shape [16, 32, 1]"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    Weights w = tiny_weights();
    replace(w, c.name, c.shape);
    std::string err = load_error(dir, tiny_config_json(), w);
    CHECK(has(err, "does not match the config"));
    CHECK(has(err, c.want));
  }
  Weights w = tiny_weights();
  for (auto& [n, t] : w)
    if (n == "model.layers.0.mlp.up_proj.weight") t = Tensor::empty_host(DType::I32, {FF, H});
  CHECK(has(load_error(dir, tiny_config_json(), w), "up_proj.weight has dtype i32"));
}

TEST_CASE("model validation: config values are bounded and checked against the tensors") {
  ScratchDir dir("mv_config");
  json j = tiny_config_json();
  j["num_hidden_layers"] = 1000000000;  // 2 layers present
  std::string err = load_error(dir, j, tiny_weights());
  CHECK(has(err, "num_hidden_layers = 1000000000"));
  CHECK(has(err, "limit of 1024"));
  j["num_hidden_layers"] = 3;
  err = load_error(dir, j, tiny_weights());
  CHECK(has(err, "3 layers"));
  CHECK(has(err, "model.layers.2.input_layernorm.weight"));

  j = tiny_config_json();
  j["attention_bias"] = true;
  err = load_error(dir, j, tiny_weights());
  CHECK(has(err, "model.layers.0.self_attn.q_proj.bias"));
  CHECK(has(err, "attention_bias"));

  j = tiny_config_json();
  j["vocab_size"] = 100000000;
  CHECK(has(load_error(dir, j, tiny_weights()), "vocab_size = 100000000"));
  j = tiny_config_json();
  j["hidden_size"] = 64;  // the tensors are 32 wide
  err = load_error(dir, j, tiny_weights());
  CHECK(has(err, "model.embed_tokens.weight has shape [16, 32], expected [16, 64]"));
}

TEST_CASE("model validation: rotary inverse frequencies are noted; any other tensor without a place is refused") {
  ScratchDir dir("mv_extra");
  Weights w = tiny_weights();
  w.emplace_back("model.layers.0.self_attn.rotary_emb.inv_freq", Tensor::zeros_host(DType::F32, {4}));
  write_text(dir.file("config.json"), tiny_config_json().dump());
  write_safetensors(dir.file("model.safetensors"), w);
  Checkpoint ck = load_checkpoint(dir.path.string());
  REQUIRE(ck.notes.size() == 1);
  CHECK(has(ck.notes[0], "rotary_emb.inv_freq"));
  CHECK(has(ck.notes[0], "computed from the config"));
  // a layer index that does not exist, a kv scale of layer -1, a module Llama lacks: each named
  for (const char* name : {"model.layers.9.mlp.up_proj.weight", "model.layers.-1.self_attn.k_scale",
                           "model.layers.0.mlp.experts.0.up_proj.weight"}) {
    Weights bad = tiny_weights();
    bad.emplace_back(name, Tensor::zeros_host(DType::F32, {4}));
    const std::string err = load_error(dir, tiny_config_json(), bad);
    CHECK_MESSAGE(has(err, name), err);
    CHECK_MESSAGE(has(err, "has no place for"), err);
  }
}

TEST_CASE("model validation: a non-finite dense weight is refused, named with its element") {
  ScratchDir dir("mv_nan");
  const uint32_t nan = 0x7fc00000u, inf = 0x7f800000u, ninf = 0xff800000u;
  const std::pair<uint32_t, const char*> cases[] = {{nan, "NaN"}, {inf, "inf"}, {ninf, "-inf"}};
  for (const auto& [bits, word] : cases) {
    Weights w = tiny_weights();
    for (auto& [name, t] : w)
      if (name == "model.layers.1.post_attention_layernorm.weight") std::memcpy(t.ptr<float>() + 3, &bits, 4);
    const std::string err = load_error(dir, tiny_config_json(), w);
    CHECK_MESSAGE(has(err, "model.layers.1.post_attention_layernorm.weight"), err);
    CHECK_MESSAGE(has(err, std::string("holds ") + word + " at element 3"), err);
  }
  Weights w = tiny_weights();  // f16 and bf16 tensors too
  for (auto& [name, t] : w)
    if (name == "model.norm.weight") {
      Tensor h = Tensor::zeros_host(DType::BF16, t.shape);
      h.ptr<uint16_t>()[1] = 0x7fc1;
      t = h;
    }
  CHECK(has(load_error(dir, tiny_config_json(), w), "'model.norm.weight' holds NaN at element 1"));
}

TEST_CASE("model validation: convert fails on a bad checkpoint") {
  ScratchDir dir("mv_convert");
  Weights w = tiny_weights();
  drop(w, "model.norm.weight");
  write_text(dir.file("config.json"), tiny_config_json().dump());
  write_safetensors(dir.file("model.safetensors"), w);
  ConvertOptions o;
  o.input = dir.path.string();
  o.output = dir.file("out");
  CHECK_THROWS_WITH_AS(convert_checkpoint(o, [](const std::string&) {}), doctest::Contains("model.norm.weight"),
                       InputError);
  CHECK_FALSE(std::filesystem::exists(dir.file("out/model.safetensors")));
}

TEST_CASE("model validation: a GGUF q/k weight with a zero-size dimension is refused (no division by zero)") {
  ScratchDir dir("mv_gguf");
  for (const char* which : {"attn_q", "attn_k"}) {
    CAPTURE(which);
    GgufBuilder g;
    g.kv_str("general.architecture", "llama");
    g.kv_u32("llama.embedding_length", H);
    g.kv_u32("llama.block_count", 1);
    g.kv_u32("llama.attention.head_count", NH);
    g.kv_u32("llama.attention.head_count_kv", NKV);
    g.kv_u32("llama.feed_forward_length", FF);
    g.kv_u32("llama.vocab_size", V);
    auto f32 = [](int64_t n) { return f32_bytes(std::vector<float>(size_t(n), 0.5f)); };
    g.tensor("token_embd.weight", 0, {H, V}, f32(H * V));
    g.tensor("output_norm.weight", 0, {H}, f32(H));
    g.tensor("blk.0.attn_norm.weight", 0, {H}, f32(H));
    g.tensor("blk.0.ffn_norm.weight", 0, {H}, f32(H));
    const bool q = std::string(which) == "attn_q";
    g.tensor("blk.0.attn_q.weight", 0, {H, uint64_t(q ? 0 : NH * HD)}, f32(q ? 0 : NH * HD * H));
    g.tensor("blk.0.attn_k.weight", 0, {H, uint64_t(q ? NKV * HD : 0)}, f32(q ? NKV * HD * H : 0));
    g.tensor("blk.0.attn_v.weight", 0, {H, NKV * HD}, f32(NKV * HD * H));
    g.tensor("blk.0.attn_output.weight", 0, {NH * HD, H}, f32(NH * HD * H));
    g.tensor("blk.0.ffn_gate.weight", 0, {H, FF}, f32(H * FF));
    g.tensor("blk.0.ffn_up.weight", 0, {H, FF}, f32(H * FF));
    g.tensor("blk.0.ffn_down.weight", 0, {FF, H}, f32(H * FF));
    write_bytes(dir.file("z.gguf"), g.build());
    const std::string want = q ? "q_proj.weight has shape [0, 32], expected [32, 32]"
                               : "k_proj.weight has shape [0, 32], expected [16, 32]";
    CHECK_THROWS_WITH_AS(load_checkpoint(dir.file("z.gguf")), doctest::Contains(want.c_str()), InputError);
  }
  // The helper alone: zero rows is an error, not a division by zero.
  CHECK_THROWS_AS(gguf_unpermute_qk(Tensor::empty_host(DType::F32, {0, 32}), 4), InputError);
}
