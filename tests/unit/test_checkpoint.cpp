// load_checkpoint: HF directories, pickle refusal, llama GGUF files (names, q/k un-permutation,
// config from metadata), and the real default model when it is present.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/model/checkpoint.h"
#include "engine/model/llama/gguf_llama.h"
#include "engine/model/layers/rope.h"
#include "engine/model/safetensors.h"
#include "format_test_util.h"
#include "skip.h"

using namespace llmctl;
using namespace llmctl::test;
using nlohmann::json;

namespace {

// hidden 32, 4 heads of 8, 2 kv heads, 1 layer, ffn 64, vocab 16.
constexpr int H = 32, NH = 4, NKV = 2, HD = 8, FF = 64, V = 16;

Tensor filled(std::vector<int64_t> shape, float scale) {
  Tensor t = Tensor::empty_host(DType::F32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = scale * float(i % 97) - 1.0f;
  return t;
}

json tiny_config() {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"hidden_size", H},
          {"num_hidden_layers", 1},
          {"num_attention_heads", NH},
          {"num_key_value_heads", NKV},
          {"intermediate_size", FF},
          {"vocab_size", V},
          {"tie_word_embeddings", true},
          {"bos_token_id", 1},
          {"eos_token_id", 2}};
}

std::vector<std::pair<std::string, Tensor>> tiny_weights() {
  const std::string l = "model.layers.0.";
  return {{"model.embed_tokens.weight", filled({V, H}, 0.01f)},
          {l + "input_layernorm.weight", filled({H}, 0.02f)},
          {l + "self_attn.q_proj.weight", filled({NH * HD, H}, 0.03f)},
          {l + "self_attn.k_proj.weight", filled({NKV * HD, H}, 0.04f)},
          {l + "self_attn.v_proj.weight", filled({NKV * HD, H}, 0.05f)},
          {l + "self_attn.o_proj.weight", filled({H, NH * HD}, 0.06f)},
          {l + "post_attention_layernorm.weight", filled({H}, 0.07f)},
          {l + "mlp.gate_proj.weight", filled({FF, H}, 0.08f)},
          {l + "mlp.up_proj.weight", filled({FF, H}, 0.09f)},
          {l + "mlp.down_proj.weight", filled({H, FF}, 0.1f)},
          {"model.norm.weight", filled({H}, 0.11f)}};
}

// The same weights as a llama GGUF file, with q/k rows permuted the way llama.cpp's converter does.
Bytes tiny_gguf(const std::string& arch = "llama", bool with_output = false, const std::vector<float>& rope_freqs = {}) {
  auto permute = [](const Tensor& w, int n_head) {  // (head, pair, i) -> (head, i, pair)
    Tensor out = Tensor::empty_host(DType::F32, w.shape);
    int64_t rows = w.dim(0), cols = w.dim(1), half = rows / n_head / 2;
    for (int64_t h = 0; h < n_head; ++h)
      for (int64_t p = 0; p < 2; ++p)
        for (int64_t i = 0; i < half; ++i)
          std::memcpy(out.ptr<float>() + (h * 2 * half + i * 2 + p) * cols,
                      w.ptr<float>() + ((h * 2 + p) * half + i) * cols, size_t(cols) * 4);
    return out;
  };
  auto bytes = [](const Tensor& t) {
    return Bytes(static_cast<uint8_t*>(t.data), static_cast<uint8_t*>(t.data) + t.nbytes());
  };
  auto ne = [](const Tensor& t) { return std::vector<uint64_t>(t.shape.rbegin(), t.shape.rend()); };
  GgufBuilder g;
  g.kv_str("general.architecture", arch);
  g.kv_u32(arch + ".embedding_length", H);
  g.kv_u32(arch + ".block_count", 1);
  g.kv_u32(arch + ".attention.head_count", NH);
  g.kv_u32(arch + ".attention.head_count_kv", NKV);
  g.kv_u32(arch + ".feed_forward_length", FF);
  g.kv_u32(arch + ".context_length", 512);
  g.kv_f32(arch + ".rope.freq_base", 500000.0f);
  g.kv_f32(arch + ".attention.layer_norm_rms_epsilon", 1e-6f);
  g.kv_u32(arch + ".rope.dimension_count", HD);
  std::vector<std::string> toks;
  for (int i = 0; i < V; ++i) toks.push_back(std::string(1, char('a' + i)));
  g.kv_str_array("tokenizer.ggml.tokens", toks);  // vocab size from here (no llama.vocab_size)
  g.kv_u32("tokenizer.ggml.bos_token_id", 1);
  g.kv_u32("tokenizer.ggml.eos_token_id", 2);
  static const std::map<std::string, std::string> names = {
      {"model.embed_tokens.weight", "token_embd.weight"},
      {"model.layers.0.input_layernorm.weight", "blk.0.attn_norm.weight"},
      {"model.layers.0.self_attn.q_proj.weight", "blk.0.attn_q.weight"},
      {"model.layers.0.self_attn.k_proj.weight", "blk.0.attn_k.weight"},
      {"model.layers.0.self_attn.v_proj.weight", "blk.0.attn_v.weight"},
      {"model.layers.0.self_attn.o_proj.weight", "blk.0.attn_output.weight"},
      {"model.layers.0.post_attention_layernorm.weight", "blk.0.ffn_norm.weight"},
      {"model.layers.0.mlp.gate_proj.weight", "blk.0.ffn_gate.weight"},
      {"model.layers.0.mlp.up_proj.weight", "blk.0.ffn_up.weight"},
      {"model.layers.0.mlp.down_proj.weight", "blk.0.ffn_down.weight"},
      {"model.norm.weight", "output_norm.weight"}};
  for (auto& [hf, t] : tiny_weights()) {
    Tensor w = t;
    if (hf.ends_with("q_proj.weight")) w = permute(t, NH);
    if (hf.ends_with("k_proj.weight")) w = permute(t, NKV);
    if (hf.ends_with("up_proj.weight")) {  // one F16 tensor
      Tensor h = convert_host(w, DType::F16);
      g.tensor(names.at(hf), 1, ne(h), bytes(h));
    } else {
      g.tensor(names.at(hf), 0, ne(w), bytes(w));
    }
  }
  if (with_output) g.tensor("output.weight", 0, {H, V}, bytes(filled({V, H}, 0.5f)));
  if (!rope_freqs.empty()) g.tensor("rope_freqs.weight", 0, {rope_freqs.size()}, f32_bytes(rope_freqs));
  return g.build();
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype == b.dtype && a.shape == b.shape && std::memcmp(a.data, b.data, a.nbytes()) == 0;
}

}  // namespace

TEST_CASE("checkpoint: HF directory") {
  ScratchDir dir("ck_hf");
  write_text(dir.file("config.json"), tiny_config().dump());
  write_text(dir.file("generation_config.json"), R"({"temperature": 0.6})");
  write_safetensors(dir.file("model.safetensors"), tiny_weights());
  Checkpoint ck = load_checkpoint(dir.path.string());
  CHECK(ck.source_format == "hf");
  CHECK(ck.hf_dir == dir.path.string());
  CHECK(ck.config.head_dim == HD);
  CHECK(ck.generation_config["temperature"] == 0.6);
  CHECK(ck.tensors.size() == tiny_weights().size());
  for (auto& [name, t] : tiny_weights()) CHECK(same_bytes(ck.get(name), t));
  CHECK_THROWS_WITH_AS(ck.get("lm_head.weight"), doctest::Contains("lm_head.weight"), InputError);

  Checkpoint bf = load_checkpoint(dir.path.string(), {DType::BF16});
  CHECK(bf.get("model.norm.weight").dtype == DType::BF16);
  CHECK(bf.get("model.norm.weight").ptr<uint16_t>()[3] == f32_to_bf16(ck.get("model.norm.weight").ptr<float>()[3]));

  json untied = tiny_config();
  untied["tie_word_embeddings"] = false;
  write_text(dir.file("config.json"), untied.dump());
  CHECK_THROWS_WITH_AS(load_checkpoint(dir.path.string()), doctest::Contains("lm_head.weight"), InputError);
  json other = tiny_config();
  other["architectures"] = {"PhiForCausalLM"};
  write_text(dir.file("config.json"), other.dump());
  CHECK_THROWS_WITH_AS(load_checkpoint(dir.path.string()), doctest::Contains("PhiForCausalLM"), InputError);
  CHECK_THROWS_WITH_AS(load_checkpoint(dir.file("nope")), doctest::Contains("does not exist"), InputError);
}

TEST_CASE("checkpoint: pickle checkpoints are refused with the reason") {
  ScratchDir dir("ck_pickle");
  write_text(dir.file("config.json"), tiny_config().dump());
  write_text(dir.file("pytorch_model.bin"), "not really a pickle");
  for (const std::string& path : {dir.path.string(), dir.file("pytorch_model.bin")}) {
    CAPTURE(path);
    try {
      load_checkpoint(path);
      FAIL("expected a refusal");
    } catch (const InputError& e) {
      std::string msg = e.what();
      CHECK(msg.find("pickle") != std::string::npos);
      CHECK(msg.find("execute") != std::string::npos);
      CHECK(msg.find("safe_serialization=True") != std::string::npos);
    }
  }
}

TEST_CASE("checkpoint: llama GGUF file") {
  ScratchDir dir("ck_gguf");
  write_bytes(dir.file("tiny.gguf"), tiny_gguf());
  Checkpoint ck = load_checkpoint(dir.file("tiny.gguf"));
  CHECK(ck.source_format == "gguf");
  REQUIRE(ck.gguf);
  const ModelConfig& c = ck.config;
  CHECK(c.hidden_size == H);
  CHECK(c.num_layers == 1);
  CHECK(c.num_heads == NH);
  CHECK(c.num_kv_heads == NKV);
  CHECK(c.head_dim == HD);
  CHECK(c.intermediate_size == FF);
  CHECK(c.vocab_size == V);
  CHECK(c.max_position_embeddings == 512);
  CHECK(c.rope_theta == 500000.0f);
  CHECK(c.rms_norm_eps == 1e-6f);
  CHECK(c.tie_word_embeddings);
  CHECK(c.bos_token_ids == std::vector<int>{1});
  CHECK(c.eos_token_ids == std::vector<int>{2});
  // Names mapped and q/k un-permuted back to exactly the HF tensors.
  for (auto& [name, t] : tiny_weights()) {
    CAPTURE(name);
    if (name.ends_with("up_proj.weight")) {
      CHECK(ck.get(name).dtype == DType::F16);  // stored dtype kept without opts.dtype
      CHECK(same_bytes(ck.get(name), convert_host(t, DType::F16)));
    } else {
      CHECK(same_bytes(ck.get(name), t));
    }
  }
  CHECK_FALSE(ck.has("lm_head.weight"));

  Checkpoint f32 = load_checkpoint(dir.file("tiny.gguf"), {DType::F32});
  CHECK(f32.get("model.layers.0.mlp.up_proj.weight").dtype == DType::F32);

  write_bytes(dir.file("untied.gguf"), tiny_gguf("llama", true));
  Checkpoint untied = load_checkpoint(dir.file("untied.gguf"));
  CHECK_FALSE(untied.config.tie_word_embeddings);
  CHECK(untied.get("lm_head.weight").shape == std::vector<int64_t>{V, H});

  // a qwen2 GGUF is read through the same reader (qwen2.* keys), and Qwen2's q/k/v biases are required
  write_bytes(dir.file("qwen.gguf"), tiny_gguf("qwen2"));
  CHECK_THROWS_WITH_AS(load_checkpoint(dir.file("qwen.gguf")), doctest::Contains("model.layers.0.self_attn.q_proj.bias"),
                       InputError);
  write_bytes(dir.file("gemma.gguf"), tiny_gguf("gemma"));
  CHECK_THROWS_WITH_AS(load_checkpoint(dir.file("gemma.gguf")), doctest::Contains("'gemma'"), InputError);
}

TEST_CASE("checkpoint: a GGUF's rope_freqs tensor: llama3's standard scaling by its parameters, any other as it is") {
  ScratchDir dir("ck_rope_freqs");
  // llama.cpp's converter for llama3 scaling (factor 8, low 1, high 4, original context 8192), in
  // double as its Python does; head_dim 8 at theta 500000 puts one frequency in each band.
  std::vector<float> standard;
  for (int i = 0; i < HD / 2; ++i) {
    const double wavelen = 2 * M_PI * std::pow(500000.0, double(2 * i) / HD), factor = 8;
    const double smooth = (8192 / wavelen - 1) / (4 - 1);
    standard.push_back(float(wavelen < 8192 / 4.0 ? 1 : wavelen > 8192 ? factor : 1 / ((1 - smooth) / factor + smooth)));
  }
  REQUIRE(standard[0] == 1.0f);
  REQUIRE(standard[2] > 1.0f);
  REQUIRE(standard[2] < 8.0f);
  write_bytes(dir.file("llama31.gguf"), tiny_gguf("llama", false, standard));
  const ModelConfig a = load_checkpoint(dir.file("llama31.gguf")).config;
  CHECK(a.rope_scaling.type == "llama3");
  CHECK(a.rope_scaling.factor == 8.0f);
  CHECK(a.rope_scaling.original_max_position_embeddings == 8192);
  // Any other table (Llama 3.2 style, another original context): frequency i divided by factor i,
  // exactly as llama.cpp applies it; convert cannot write it as config.json and says so.
  const std::vector<float> other = {1.0f, 1.5f, 6.25f, 32.0f};
  write_bytes(dir.file("other.gguf"), tiny_gguf("llama", false, other));
  const ModelConfig b = load_checkpoint(dir.file("other.gguf")).config;
  CHECK(b.rope_scaling.type == "freq_factors");
  CHECK(b.rope_scaling.freq_factors == other);
  ModelConfig plain = b;
  plain.rope_scaling = {};
  const RopeParams pb = make_rope_params(b), pp = make_rope_params(plain);
  for (int i = 0; i < HD / 2; ++i) CHECK(pb.inv_freq[size_t(i)] == pp.inv_freq[size_t(i)] / other[size_t(i)]);
  CHECK_THROWS_WITH_AS(b.to_hf_json(), doctest::Contains("no config.json form"), InputError);
  write_bytes(dir.file("bad.gguf"), tiny_gguf("llama", false, {1.0f, 0.0f, 2.0f, 4.0f}));
  CHECK_THROWS_WITH_AS(load_checkpoint(dir.file("bad.gguf")), doctest::Contains("rope frequency factor of 0"), InputError);
  write_bytes(dir.file("short.gguf"), tiny_gguf("llama", false, {1.0f, 2.0f}));
  CHECK_THROWS_WITH_AS(load_checkpoint(dir.file("short.gguf")), doctest::Contains("rope_freqs.weight has 2 entries"),
                       InputError);
}

TEST_CASE("checkpoint: GGUF names and un-permutation helpers") {
  CHECK(gguf_to_hf_name("token_embd.weight") == "model.embed_tokens.weight");
  CHECK(gguf_to_hf_name("output.weight") == "lm_head.weight");
  CHECK(gguf_to_hf_name("output_norm.weight") == "model.norm.weight");
  CHECK(gguf_to_hf_name("blk.12.attn_output.weight") == "model.layers.12.self_attn.o_proj.weight");
  CHECK(gguf_to_hf_name("blk.3.ffn_norm.weight") == "model.layers.3.post_attention_layernorm.weight");
  CHECK(gguf_to_hf_name("blk.3.attn_q.bias") == "model.layers.3.self_attn.q_proj.bias");
  CHECK(gguf_to_hf_name("blk.3.ffn_gate_exps.weight") == "");
  CHECK(gguf_to_hf_name("mystery") == "");
  CHECK(gguf_to_hf_name("blk.x.attn_q.weight") == "");
  CHECK(gguf_to_hf_name("blk..attn_q.weight") == "");
  CHECK(gguf_to_hf_name("blk.1.attn_q.scale") == "");
  CHECK(gguf_to_hf_name("token_embd") == "");
  // One head of 8 rows: llama.cpp order (pairs interleaved) -> HF order (halves).
  Tensor rows = Tensor::empty_host(DType::F32, {8});
  for (int i = 0; i < 8; ++i) rows.ptr<float>()[i] = float(i);
  Tensor u = gguf_unpermute_qk(rows, 1);
  std::vector<float> got(u.ptr<float>(), u.ptr<float>() + 8);
  CHECK(got == std::vector<float>{0, 2, 4, 6, 1, 3, 5, 7});
  CHECK_THROWS_AS(gguf_unpermute_qk(rows, 3), InputError);
}

TEST_CASE("checkpoint: the default model, SmolLM2-135M-Instruct Q4_1 GGUF") {
  const char* home = std::getenv("LLMCTL_HOME");
  std::string base = home ? home : std::string(std::getenv("HOME") ? std::getenv("HOME") : "") + "/.cache/llmctl";
  std::string path = base + "/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(path)) LLMCTL_SKIP(path << " is absent (scripts/fetch-model.sh fetches the default model)");
  Checkpoint ck = load_checkpoint(path);
  const ModelConfig& c = ck.config;
  CHECK(c.hidden_size == 576);
  CHECK(c.num_layers == 30);
  CHECK(c.num_heads == 9);
  CHECK(c.num_kv_heads == 3);
  CHECK(c.head_dim == 64);
  CHECK(c.intermediate_size == 1536);
  CHECK(c.vocab_size == 49152);
  CHECK(c.tie_word_embeddings);
  CHECK(c.rope_theta == 100000.0f);
  CHECK(c.max_position_embeddings == 8192);
  CHECK(c.rms_norm_eps == 1e-5f);
  CHECK(ck.tensors.size() == 272);
  CHECK(ck.get("model.embed_tokens.weight").shape == std::vector<int64_t>{49152, 576});
  CHECK(ck.get("model.layers.0.self_attn.k_proj.weight").shape == std::vector<int64_t>{192, 576});

  // Pinned by tests/unit/data/smollm2_gguf_pins.py (gguf + numpy, transformers' reverse permutation;
  // checked once against the q_proj / k_proj transformers itself loads from this file).
  struct Pin {
    const char* tensor;
    int row;
    double sum;
    float first;
  };
  const Pin pins[] = {
      {"model.layers.0.self_attn.q_proj.weight", 0, 1.00726318, -0.0963134766f},
      {"model.layers.0.self_attn.q_proj.weight", 1, 4.2230835, -0.159179688f},
      {"model.layers.0.self_attn.q_proj.weight", 31, -0.721069336, 0.186950684f},
      {"model.layers.0.self_attn.q_proj.weight", 32, -0.712097168, -0.11730957f},
      {"model.layers.0.self_attn.q_proj.weight", 200, 17.4111938, 0.1484375f},
      {"model.layers.0.self_attn.q_proj.weight", 575, -4.73495483, -0.156799316f},
      {"model.layers.0.self_attn.k_proj.weight", 1, -0.983581543, 0.203369141f},
      {"model.layers.0.self_attn.k_proj.weight", 32, -12.9134827, 0.056640625f},
      {"model.layers.0.self_attn.k_proj.weight", 191, 6.21496582, 0.0158691406f},
      {"model.layers.29.self_attn.q_proj.weight", 1, 4.73257446, 0.267791748f},
      {"model.layers.29.self_attn.q_proj.weight", 64, 0.36668396, -0.245574951f},
      {"model.layers.29.self_attn.k_proj.weight", 63, 1.20333862, -0.018371582f},
  };
  for (const Pin& p : pins) {
    CAPTURE(p.tensor);
    CAPTURE(p.row);
    const Tensor& w = ck.get(p.tensor);
    REQUIRE(w.dtype == DType::F32);
    const float* row = w.ptr<float>() + int64_t(p.row) * w.dim(1);
    double sum = 0;
    for (int64_t i = 0; i < w.dim(1); ++i) sum += row[i];
    CHECK(sum == doctest::Approx(p.sum).epsilon(1e-7));
    CHECK(row[0] == doctest::Approx(p.first).epsilon(1e-8));
  }
}
