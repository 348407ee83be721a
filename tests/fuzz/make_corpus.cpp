// Writes the seed corpora of the fuzz harnesses into tests/fuzz/corpus/<harness>/ (run from the
// repository root: build/fuzz_make_corpus [REPO_ROOT]). The seeds are small and meaningful: a tiny
// GGUF with llama metadata and float and quantized tensors, small safetensors files, the fuzz
// tokenizer's own tokenizer.json, the golden chat templates, request bodies valid and invalid,
// HTTP requests plain, chunked and pipelined. Byte 0 of several harnesses' inputs is a mode byte
// (see each harness); seeds are written with a few of its values.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>

#include "engine/model/random_checkpoint.h"
#include "engine/model/safetensors.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "quant/format/checkpoint_layout.h"
#include "quant/format/gguf_blocks.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/unit/format_test_util.h"
#include "tests/unit/tiny_config.h"

using namespace llmctl;
namespace fs = std::filesystem;
using llmctl::test::Bytes;

namespace {

fs::path g_root;

void seed(const std::string& harness, const std::string& name, const std::string& content) {
  fs::path dir = g_root / "tests/fuzz/corpus" / harness;
  fs::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
  out << content;
}
void seed(const std::string& harness, const std::string& name, const Bytes& b) {
  seed(harness, name, std::string(b.begin(), b.end()));
}
std::string mode(uint8_t m, const std::string& rest) { return std::string(1, char(m)) + rest; }

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void gguf_seeds() {
  using llmctl::test::GgufBuilder;
  using llmctl::test::f32_bytes;
  // The tiny llama's shape (1 layer, hidden 32, 2 heads of 16, 1 kv head, MLP 64).
  auto tiny_shape = [](GgufBuilder& b) {
    b.kv_u32("llama.block_count", 1);
    b.kv_u32("llama.context_length", 64);
    b.kv_u32("llama.embedding_length", 32);
    b.kv_u32("llama.feed_forward_length", 64);
    b.kv_u32("llama.attention.head_count", 2);
    b.kv_u32("llama.attention.head_count_kv", 1);
  };
  GgufBuilder g;
  g.kv_str("general.architecture", "llama");
  g.kv_str("general.name", "tiny");
  tiny_shape(g);
  g.kv_f32("llama.rope.freq_base", 10000.0f);
  g.kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  g.kv_str("tokenizer.ggml.model", "gpt2");
  g.kv_str("tokenizer.ggml.pre", "smollm");
  g.kv_str_array("tokenizer.ggml.tokens", {"a", "b", "\xc3\xa9t\xc3\xa9", "<|im_end|>"});
  g.kv_i32_array("tokenizer.ggml.token_type", {1, 1, 1, 3});
  g.kv_str_array("tokenizer.ggml.merges", {"a b"});
  g.kv_u32("tokenizer.ggml.eos_token_id", 3);
  g.kv_bool("tokenizer.ggml.add_bos_token", false);
  g.kv_str("tokenizer.chat_template", "{{ messages[0]['content'] }}");
  g.tensor("token_embd.weight", 0, {4, 2}, f32_bytes({1, 2, 3, 4, 5, 6, 7, 8}));
  g.tensor("output_norm.weight", 1, {2}, Bytes{0x00, 0x3c, 0x00, 0xc0});  // f16 1.0, -2.0
  g.tensor("bf", 30, {2}, Bytes{0x80, 0x3f, 0x00, 0x40});                 // bf16 1.0, 2.0
  Bytes q8{0x00, 0x3c};  // Q8_0: f16 scale 1.0, 32 int8
  for (int i = 0; i < 32; ++i) q8.push_back(uint8_t(i - 16));
  g.tensor("blk.0.attn_q.weight", 8, {32}, q8);
  Bytes q4{0x00, 0x38};  // Q4_0: f16 scale 0.5, 16 bytes of nibbles
  for (int i = 0; i < 16; ++i) q4.push_back(uint8_t(i * 17));
  g.tensor("blk.0.attn_k.weight", 2, {32}, q4);
  Bytes q4k(144);  // Q4_K: one 256-element super-block
  for (size_t i = 0; i < q4k.size(); ++i) q4k[i] = uint8_t(i * 7 + 3);
  q4k[0] = 0x00, q4k[1] = 0x3c, q4k[2] = 0x00, q4k[3] = 0x38;
  g.tensor("blk.0.ffn_down.weight", 12, {256}, q4k);
  Bytes q6k(210);  // Q6_K: one super-block
  for (size_t i = 0; i < q6k.size(); ++i) q6k[i] = uint8_t(i * 13 + 1);
  q6k[208] = 0x00, q6k[209] = 0x3c;
  g.tensor("blk.0.ffn_up.weight", 14, {256}, q6k);
  seed("gguf", "llama_tiny.gguf", g.build());

  // Whole tiny models that load (tiny_shape, vocab 4; every matrix Q8_0): the table tied, one whose
  // middle byte asks the harness for LoadOptions::quantized_embedding (the table kept packed only)
  // and one whose does not; and the table untied (an output.weight of its own), kept packed.
  auto q8_0 = [](int64_t elements, std::mt19937& rng) {
    Bytes b;
    for (int64_t i = 0; i < elements / 32; ++i) {
      b.push_back(0x00), b.push_back(0x20);  // f16 scale 2^-7
      for (int j = 0; j < 32; ++j) b.push_back(uint8_t(int(rng() % 255) - 127));
    }
    return b;
  };
  auto tiny_q8_model = [&](uint32_t s, bool untied) {
    std::mt19937 rng(s);
    GgufBuilder m;
    m.kv_str("general.architecture", "llama");
    tiny_shape(m);
    m.kv_u32("llama.vocab_size", 4);
    m.tensor("token_embd.weight", 8, {32, 4}, q8_0(128, rng));
    if (untied) m.tensor("output.weight", 8, {32, 4}, q8_0(128, rng));
    m.tensor("output_norm.weight", 0, {32}, f32_bytes(std::vector<float>(32, 1.0f)));
    m.tensor("blk.0.attn_norm.weight", 0, {32}, f32_bytes(std::vector<float>(32, 1.0f)));
    m.tensor("blk.0.ffn_norm.weight", 0, {32}, f32_bytes(std::vector<float>(32, 1.0f)));
    const std::pair<const char*, std::pair<uint64_t, uint64_t>> linears[] = {
        {"attn_q", {32, 32}}, {"attn_k", {32, 16}}, {"attn_v", {32, 16}}, {"attn_output", {32, 32}},
        {"ffn_gate", {32, 64}}, {"ffn_up", {32, 64}}, {"ffn_down", {64, 32}}};  // {K, N}
    for (const auto& [name, kn] : linears)
      m.tensor(std::string("blk.0.") + name + ".weight", 8, {kn.first, kn.second}, q8_0(int64_t(kn.first * kn.second), rng));
    return m.build();
  };
  bool have[2] = {false, false};
  for (uint32_t s = 1; !(have[0] && have[1]); ++s) {
    const Bytes b = tiny_q8_model(s, false);
    const int bit = b[b.size() / 2] & 1;
    if (have[bit]) continue;
    have[bit] = true;
    seed("gguf", bit ? "llama_tied_q8_packed_embedding.gguf" : "llama_tied_q8.gguf", b);
  }
  for (uint32_t s = 1;; ++s) {
    const Bytes b = tiny_q8_model(s, true);
    if (!(b[b.size() / 2] & 1)) continue;
    seed("gguf", "llama_untied_q8_packed_embedding.gguf", b);
    break;
  }

  // Families with rope metadata of their own, as llama.cpp's converter writes them. Phi-3 (hidden 32,
  // 2 heads of 16, 1 kv head): fused attn_qkv and a 2I-row ffn_up, a window, LongRoPE's factor
  // tensors over 12 rotary dimensions (partial rotary). Qwen2 with YaRN rope. Gemma 2.
  auto ones = [](size_t n) { return f32_bytes(std::vector<float>(n, 0.5f)); };
  auto family_shape = [](GgufBuilder& b, const std::string& a) {
    b.kv_u32(a + "block_count", 1);
    b.kv_u32(a + "context_length", 64);
    b.kv_u32(a + "embedding_length", 32);
    b.kv_u32(a + "feed_forward_length", 64);
    b.kv_u32(a + "attention.head_count", 2);
    b.kv_u32(a + "attention.head_count_kv", 1);
    b.kv_u32(a + "vocab_size", 4);
  };
  GgufBuilder phi;
  phi.kv_str("general.architecture", "phi3");
  family_shape(phi, "phi3.");
  phi.kv_u32("phi3.rope.dimension_count", 12);
  phi.kv_u32("phi3.attention.sliding_window", 8);
  phi.kv_u32("phi3.rope.scaling.original_context_length", 16);
  phi.kv_f32("phi3.rope.scaling.attn_factor", 1.2f);
  phi.tensor("rope_factors_long.weight", 0, {6}, f32_bytes({2, 3, 4, 5, 6, 7}));
  phi.tensor("rope_factors_short.weight", 0, {6}, f32_bytes({1, 1.2f, 1.4f, 1.6f, 1.8f, 2}));
  phi.tensor("token_embd.weight", 0, {32, 4}, ones(128));
  phi.tensor("output_norm.weight", 0, {32}, ones(32));
  phi.tensor("blk.0.attn_norm.weight", 0, {32}, ones(32));
  phi.tensor("blk.0.ffn_norm.weight", 0, {32}, ones(32));
  phi.tensor("blk.0.attn_qkv.weight", 0, {32, 64}, ones(32 * 64));
  phi.tensor("blk.0.attn_output.weight", 0, {32, 32}, ones(32 * 32));
  phi.tensor("blk.0.ffn_up.weight", 0, {32, 128}, ones(32 * 128));
  phi.tensor("blk.0.ffn_down.weight", 0, {64, 32}, ones(64 * 32));
  seed("gguf", "phi3_longrope_partial.gguf", phi.build());
  GgufBuilder yarn;
  yarn.kv_str("general.architecture", "qwen2");
  family_shape(yarn, "qwen2.");
  yarn.kv_str("qwen2.rope.scaling.type", "yarn");
  yarn.kv_f32("qwen2.rope.scaling.factor", 4.0f);
  yarn.kv_u32("qwen2.rope.scaling.original_context_length", 16);
  yarn.kv_f32("qwen2.rope.scaling.yarn_beta_fast", 32.0f);
  yarn.tensor("token_embd.weight", 0, {32, 4}, ones(128));
  yarn.tensor("output_norm.weight", 0, {32}, ones(32));
  seed("gguf", "qwen2_yarn.gguf", yarn.build());
  GgufBuilder moe;  // Qwen3-MoE: 4 experts, 2 routed; stacked expert tensors in Q8_0 (one block a row)
  moe.kv_str("general.architecture", "qwen3moe");
  family_shape(moe, "qwen3moe.");
  moe.kv_u32("qwen3moe.attention.key_length", 16);
  moe.kv_u32("qwen3moe.expert_count", 4);
  moe.kv_u32("qwen3moe.expert_used_count", 2);
  moe.kv_u32("qwen3moe.expert_feed_forward_length", 32);
  moe.kv_str("tokenizer.ggml.model", "gpt2");
  moe.kv_str("tokenizer.ggml.pre", "qwen2");
  moe.kv_str_array("tokenizer.ggml.tokens", {"a", "b", "c", "<|im_end|>"});
  moe.kv_i32_array("tokenizer.ggml.token_type", {1, 1, 1, 3});
  moe.kv_str_array("tokenizer.ggml.merges", {"a b"});
  moe.kv_u32("tokenizer.ggml.eos_token_id", 3);
  moe.tensor("token_embd.weight", 0, {32, 4}, ones(128));
  moe.tensor("output.weight", 0, {32, 4}, ones(128));
  moe.tensor("output_norm.weight", 0, {32}, ones(32));
  moe.tensor("blk.0.attn_norm.weight", 0, {32}, ones(32));
  moe.tensor("blk.0.ffn_norm.weight", 0, {32}, ones(32));
  moe.tensor("blk.0.attn_q_norm.weight", 0, {16}, ones(16));
  moe.tensor("blk.0.attn_k_norm.weight", 0, {16}, ones(16));
  moe.tensor("blk.0.attn_q.weight", 0, {32, 32}, ones(1024));
  moe.tensor("blk.0.attn_k.weight", 0, {32, 16}, ones(512));
  moe.tensor("blk.0.attn_v.weight", 0, {32, 16}, ones(512));
  moe.tensor("blk.0.attn_output.weight", 0, {32, 32}, ones(1024));
  moe.tensor("blk.0.ffn_gate_inp.weight", 0, {32, 4}, ones(128));
  Bytes q8_rows;  // 4 experts x 32 rows of one Q8_0 block each
  for (int r = 0; r < 128; ++r) {
    q8_rows.insert(q8_rows.end(), {0x00, 0x30});  // f16 scale 0.125
    for (int i = 0; i < 32; ++i) q8_rows.push_back(uint8_t((r * 7 + i * 3) % 255 - 127));
  }
  for (const char* part : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"})
    moe.tensor("blk.0." + std::string(part) + ".weight", 8, {32, 32, 4}, q8_rows);
  seed("gguf", "qwen3moe_stacked_experts.gguf", moe.build());
  GgufBuilder gemma;  // Gemma 2: soft-capping keys, sliding layers implied, sandwich norms
  gemma.kv_str("general.architecture", "gemma2");
  family_shape(gemma, "gemma2.");
  gemma.kv_u32("gemma2.attention.sliding_window", 4);
  gemma.kv_f32("gemma2.attn_logit_softcapping", 50.0f);
  gemma.kv_f32("gemma2.final_logit_softcapping", 30.0f);
  gemma.tensor("token_embd.weight", 0, {32, 4}, ones(128));
  gemma.tensor("output_norm.weight", 0, {32}, ones(32));
  {  // one layer, a sliding one
    const std::string p = "blk.0.";
    for (const char* norm : {"attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm"})
      gemma.tensor(p + norm + ".weight", 0, {32}, ones(32));
    for (const auto& [name, kn] : {std::pair<const char*, std::pair<uint64_t, uint64_t>>{"attn_q", {32, 32}},
                                   {"attn_k", {32, 16}}, {"attn_v", {32, 16}}, {"attn_output", {32, 32}},
                                   {"ffn_gate", {32, 64}}, {"ffn_up", {32, 64}}, {"ffn_down", {64, 32}}})
      gemma.tensor(p + name + ".weight", 0, {kn.first, kn.second}, ones(kn.first * kn.second));
  }
  seed("gguf", "gemma2_softcap.gguf", gemma.build());

  // The IQ grid and ternary formats (IQ2_XXS, IQ2_XS, IQ3_XXS, IQ1_S, IQ3_S, IQ2_S, IQ1_M, TQ1_0, TQ2_0):
  // a tensor of two random 256-element rows each (every grid index and sign pattern the bytes give;
  // f16 scales included, so some are inf or NaN), dequantized and converted by the harness.
  GgufBuilder grids;
  grids.kv_str("general.architecture", "llama");
  std::mt19937 grid_rng(38);
  for (uint32_t type : {16u, 17u, 18u, 19u, 21u, 22u, 29u, 34u, 35u}) {
    quant::GgmlBlockLayout l;
    if (!quant::ggml_block_layout(type, &l)) throw std::runtime_error("no layout for a grid type");
    Bytes b(2 * l.type_size);
    for (uint8_t& x : b) x = uint8_t(grid_rng());
    grids.tensor(std::string("grid.") + quant::ggml_type_label(type), type, {256, 2}, b);
  }
  seed("gguf", "grid_types.gguf", grids.build());

  GgufBuilder empty;
  seed("gguf", "empty.gguf", empty.build());
  GgufBuilder v2;
  v2.version = 2;
  v2.kv_str("general.architecture", "llama");
  v2.tensor("a", 0, {2, 2}, f32_bytes({1, 2, 3, 4}));
  seed("gguf", "v2.gguf", v2.build());
  GgufBuilder bad;  // a tensor past the end of the file
  bad.tensor("a", 0, {4}, f32_bytes({1, 2}), 0);
  seed("gguf", "out_of_range.gguf", bad.build());
}

void safetensors_seeds() {
  auto file = [](const std::string& header, const Bytes& data) {
    Bytes b;
    llmctl::test::put<uint64_t>(b, header.size());
    b.insert(b.end(), header.begin(), header.end());
    b.insert(b.end(), data.begin(), data.end());
    return b;
  };
  Bytes data(64);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i);
  seed("safetensors", "two.safetensors",
       file(R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
            R"("b":{"dtype":"BF16","shape":[4],"data_offsets":[16,24]},"c":{"dtype":"I64","shape":[1],"data_offsets":[24,32]}})",
            Bytes(data.begin(), data.begin() + 32)));
  seed("safetensors", "dtypes.safetensors",
       file(R"({"f16":{"dtype":"F16","shape":[2,3],"data_offsets":[0,12]},"i32":{"dtype":"I32","shape":[3],"data_offsets":[12,24]},)"
            R"("i8":{"dtype":"I8","shape":[4],"data_offsets":[24,28]},"u8":{"dtype":"U8","shape":[4],"data_offsets":[28,32]},)"
            R"("s":{"dtype":"F32","shape":[],"data_offsets":[32,36]}})",
            Bytes(data.begin(), data.begin() + 36)));
  seed("safetensors", "empty_header.safetensors", file("{}", {}));
  seed("safetensors", "overlap.safetensors",
       file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
            Bytes(data.begin(), data.begin() + 12)));
  seed("safetensors", "padded.safetensors",
       file(R"({"w":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]}}      )", Bytes(data.begin(), data.begin() + 8)));
}

// quantized_checkpoint: config.json, NUL, model.safetensors of a one-layer tiny Llama (hidden 32,
// intermediate 48, vocab 16) whose linears are packed in each layout, lm_head tied, the last
// down_proj left dense (ignored); one seed also carries fp8 KV scales (kv_cache_scheme), one an
// act-order g_idx (each group's columns scattered by a seeded order, the loader's permutation path).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using SeedTweak = std::function<void(NamedTensors&, nlohmann::json& config)>;

std::string quantized_checkpoint_seed(const quant::QuantConfigInfo& info, bool kv_scales, const SeedTweak& tweak = {}) {
  const ModelConfig c = llmctl::test::tiny_llama_config(16, 1, 8);
  Checkpoint ck = random_checkpoint(c, 3, 0.05f);
  std::mt19937 rng(7);
  NamedTensors out;
  auto add = [&](const std::string& name, DType dt, const std::vector<int64_t>& shape, const void* bytes) {
    Tensor t = Tensor::empty_host(dt, shape);
    std::memcpy(t.data, bytes, t.nbytes());
    out.emplace_back(name, t);
  };
  for (auto& [name, t] : ck.tensors) {
    const std::string prefix = name.substr(0, name.size() - std::string(".weight").size());
    if (name.find("_proj.weight") == std::string::npos || info.ignores(prefix)) {
      out.emplace_back(name, t);
      continue;
    }
    quant::QuantizedLinear w;
    w.n = t.shape[0], w.k = t.shape[1], w.scheme = info.scheme;
    std::uniform_int_distribution<int> code(0, w.scheme.max_code()), zero(1, w.scheme.max_code());  // GPTQ v1: no zero 0
    for (int64_t i = 0; i < w.n * w.k; ++i) w.q.push_back(uint8_t(code(rng)));
    for (int64_t i = 0; i < w.n * w.groups(); ++i) {
      w.scales.push_back(0.01f + 0.001f * float(i % 17));
      w.zeros.push_back(w.scheme.symmetric ? w.scheme.sym_zero() : zero(rng));
    }
    if (info.act_order) {  // GPTQ desc_act: group i / group_size of a shuffled column order
      std::vector<int32_t> order(size_t(w.k));
      for (int64_t i = 0; i < w.k; ++i) order[size_t(i)] = int32_t(i);
      std::shuffle(order.begin(), order.end(), rng);
      w.g_idx.assign(size_t(w.k), 0);
      for (int64_t i = 0; i < w.k; ++i) w.g_idx[size_t(order[size_t(i)])] = int32_t(i / w.scheme.group_size);
    }
    for (auto& [suffix, p] : quant::pack_linear_weight(info.layout, w, "F16")) {
      const DType dt = p.dtype == "I32" ? DType::I32 : p.dtype == "I64" ? DType::I64 : DType::F16;
      add(prefix + "." + suffix, dt, p.shape, p.bytes.data());
    }
  }
  if (kv_scales) {
    const float k[2] = {0.02f, 0.03f}, v[2] = {0.01f, 0.04f};
    add("model.layers.0.self_attn.k_scale", DType::F32, {2}, k);
    add("model.layers.0.self_attn.v_scale", DType::F32, {1}, v);
  }
  nlohmann::json cfg = c.to_hf_json();
  cfg["quantization_config"] = quant::make_quantization_config(info);
  if (tweak) tweak(out, cfg);
  const fs::path tmp = fs::temp_directory_path() / "llmctl-make-corpus.safetensors";
  write_safetensors(tmp.string(), out);
  std::string seed_bytes = cfg.dump(1) + std::string(1, '\0') + read_text(tmp);
  fs::remove(tmp);
  return seed_bytes;
}

// Checkpoints whose config and tensors disagree, each of which once loaded and ran wrong (the
// reliability review's cases): the harness's rules say such a file is refused by name.
void inconsistent_checkpoint_seeds() {
  quant::QuantConfigInfo sym, asym;
  sym.layout = asym.layout = quant::QuantLayout::CompressedTensors;
  sym.scheme = {4, 16, true};
  asym.scheme = {4, 16, false};
  sym.ignore = asym.ignore = {"lm_head", "re:.*down_proj$"};
  auto find = [](NamedTensors& t, const std::string& name) -> Tensor& {
    for (auto& [n, x] : t)
      if (n == name) return x;
    throw std::runtime_error("make_corpus: no tensor " + name);
  };
  // asymmetric tensors (weight_zero_point) under a config that says symmetric: true
  seed("quantized_checkpoint", "bad_sym_config_over_zero_points",
       quantized_checkpoint_seed(asym, false, [&](NamedTensors&, nlohmann::json& cfg) {
         cfg["quantization_config"] = quant::make_quantization_config(sym);
       }));
  // a kv scale named for layer -1 beside the real ones
  seed("quantized_checkpoint", "bad_kv_scale_layer_minus_1",
       quantized_checkpoint_seed(sym, false, [&](NamedTensors& t, nlohmann::json&) {
         Tensor k = Tensor::empty_host(DType::F32, {1});
         k.ptr<float>()[0] = 0.5f;
         t.emplace_back("model.layers.-1.self_attn.k_scale", k);
       }));
  // a NaN in a dense norm weight
  seed("quantized_checkpoint", "bad_nan_norm", quantized_checkpoint_seed(sym, false, [&](NamedTensors& t, nlohmann::json&) {
         Tensor& norm = find(t, "model.layers.0.input_layernorm.weight");
         Tensor copy = Tensor::empty_host(norm.dtype, norm.shape);
         std::memcpy(copy.data, norm.data, norm.nbytes());
         copy.ptr<float>()[1] = std::nanf("");
         norm = copy;
       }));
  // a weight scale of 1e38 (f32 scales)
  seed("quantized_checkpoint", "bad_scale_1e38", quantized_checkpoint_seed(sym, false, [&](NamedTensors& t, nlohmann::json&) {
         Tensor& sc = find(t, "model.layers.0.self_attn.q_proj.weight_scale");
         Tensor f = Tensor::empty_host(DType::F32, sc.shape);
         for (int64_t i = 0; i < f.numel(); ++i) f.ptr<float>()[i] = i == 2 ? 1e38f : 0.01f;
         sc = f;
       }));
}

void quantized_checkpoint_seeds() {
  struct Case {
    const char* name;
    quant::QuantLayout layout;
    quant::QuantScheme scheme;
    bool kv;
    bool act_order = false;
  };
  const Case cases[] = {{"ct_int4_g16_sym", quant::QuantLayout::CompressedTensors, {4, 16, true}, false},
                        {"ct_int4_g16_asym_kvfp8", quant::QuantLayout::CompressedTensors, {4, 16, false}, true},
                        {"ct_int8_channel", quant::QuantLayout::CompressedTensors, {8, -1, true}, false},
                        {"awq_int4_g16", quant::QuantLayout::AutoAwqGemm, {4, 16, false}, false},
                        {"gptq_int4_g16", quant::QuantLayout::Gptq, {4, 16, true}, false},
                        {"gptq_int8_g16_asym", quant::QuantLayout::Gptq, {8, 16, false}, false},
                        {"gptq_int4_g16_actorder", quant::QuantLayout::Gptq, {4, 16, true}, false, true}};
  for (const Case& cs : cases) {
    quant::QuantConfigInfo info;
    info.layout = cs.layout;
    info.scheme = cs.scheme;
    info.act_order = cs.act_order;
    info.ignore = {"lm_head", "re:.*down_proj$"};
    if (cs.kv) info.kv_cache_scheme = {{"num_bits", 8}, {"type", "float"}, {"strategy", "attn_head"}, {"dynamic", false}, {"symmetric", true}};
    seed("quantized_checkpoint", cs.name, quantized_checkpoint_seed(info, cs.kv));
  }
  inconsistent_checkpoint_seeds();
}

void tokenizer_seeds() {
  const BpeTokenizer& tok = fuzz::small_bpe();
  seed("tokenizer_json", "small.json", tok.to_hf_tokenizer_json().dump());
  seed("tokenizer_json", "small_with_config.json",
       tok.to_hf_tokenizer_json().dump() + std::string(1, '\0') + tok.to_hf_tokenizer_config(2048).dump());
  nlohmann::json j = tok.to_hf_tokenizer_json();
  for (auto& m : j["model"]["merges"]) m = m[0].get<std::string>() + " " + m[1].get<std::string>();
  j["pre_tokenizer"] = nlohmann::json::parse(R"({"type":"Sequence","pretokenizers":[)"
      R"({"type":"Split","pattern":{"Regex":"\\p{N}{1,3}"},"behavior":"Isolated","invert":false},)"
      R"({"type":"Digits","individual_digits":true},{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true}]})");
  j["normalizer"] = {{"type", "NFC"}};
  seed("tokenizer_json", "string_merges_sequence.json", j.dump());
  seed("tokenizer_json", "wordpiece.json", R"({"model":{"type":"WordPiece","vocab":{"a":0}}})");

  const std::string text = "Hello world, the quick brown fox jumps over the lazy dog 2024!\n"
                           "<|im_start|>user\ncaf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC\xF0\x9F\x98\x80<|im_end|>\n<tool>x\xFF\xC0";
  seed("bpe", "text_smollm", mode(4, text));
  seed("bpe", "text_llama3_nospecial", mode(1, text));
  seed("bpe", "text_qwen2_skip", mode(2 | 4 | 8, text));
  seed("bpe", "ids_raw", mode(16, std::string("\x01\x00\x00\x00\xff\xff\xff\xff\x00\x01\x00\x00\x10\x01\x00\x00", 16)));
  seed("sentencepiece", "text_special", mode(1, text + "<s> <ctl></s>  two  spaces"));
  seed("sentencepiece", "text_plain", mode(2, "the quick brown fox\n\tjumps"));
  seed("sentencepiece", "ids_raw", mode(4, std::string("\x01\x00\x00\x00\x03\x01\x00\x00\xff\xff\xff\x7f", 12)));
}

void jinja_seeds() {
  for (const auto& e : fs::directory_iterator(g_root / "tests/golden/chat_templates/templates"))
    seed("jinja", e.path().filename().string(), read_text(e.path()));
  seed("jinja", "context_tools.jinja",
       std::string("{%- if tools %}{{ tools | tojson(indent=2) }}{% endif %}{% for m in messages %}"
                   "{{ m.role | upper }}: {{ m.content | trim }}{% if not loop.last %}\n{% endif %}{% endfor %}") +
           std::string(1, '\0') +
           R"({"messages":[{"role":"user","content":"  hi  "},{"role":"assistant","content":"yo"}],"tools":[{"name":"f","x":[1,2.5,null,true]}]})");
  seed("jinja", "macros_ns.jinja",
       "{% set ns = namespace(n=0) %}{% macro m(x, y=2) %}{{ x * y }}{% endmacro %}"
       "{% for i in range(5) if i is odd %}{% set ns.n = ns.n + i %}{{ m(i) }},{% else %}none{% endfor %}"
       "{{ ns.n }}{{ 'a,b,c'.split(',') | join('-') }}{{ [3,1,2] | sort | list }}{{ {'k': 1}.items() | list }}"
       "{{ 'x' ~ 1 if true else 'y' }}{{ '%s' % 'fmt' }}{{ messages | length }}{% raw %}{{ }}{% endraw %}"
       "{{ raise_exception('stop') if false }}");
  seed("jinja", "filters.jinja",
       "{{ messages[-1]['content'][1:5] | replace('a', 'b') | title }}{{ '  x ' | trim | center(9) }}"
       "{{ (1, 2) + (3,) }}{{ 7 // 2 }}{{ 2 ** 10 }}{{ none is none }}{{ 'abc' | reverse | join }}"
       "{{ messages | map(attribute='role') | unique | list }}{{ messages | selectattr('role', 'equalto', 'user') | list | length }}");
  // str.format, Markup + str, filters over none (the paths real templates needed).
  seed("jinja", "format_markup.jinja",
       "{{ '<t{}>{{}}{0!r}'.format(messages[0].role) }}{{ '{a}-{b!s}'.format(a=1, b=none) }}"
       "{{ 'x<'|safe + messages[0].content }}{{ (messages[0].content|e) + '&' }}"
       "{{ none|selectattr('type', 'equalto', 'x')|list }}{{ none|map(attribute='a')|list }}{{ none|reject|list }}");
}

// Model outputs the tool-call parsers read (fuzz_tool_calls): byte 0 picks the format and the chunk size.
void tool_call_seeds() {
  const std::pair<int, std::string> outputs[] = {
      {0, "Sure.\n<tool_call>\n{\"name\": \"get_w\", \"arguments\": {\"c\": \"P\"}}\n</tool_call>\n<tool_call>\n{\"arguments\": {}, \"name\": \"f\"}\n</tool_call>"},
      {0, "<tool_call>\n{\"name\": \"get_w\", \"arguments\": {\"c\": \"un\\\"fini"},
      {1, "<|python_tag|>{\"name\": \"get_w\", \"parameters\": {\"c\": 1}}; {\"name\": \"f\", \"parameters\": {}}"},
      {2, "[TOOL_CALLS]get_w[CALL_ID]abcdefghi[ARGS]{\"c\": [1, {\"d\": null}]}[TOOL_CALLS]f[ARGS]{}"},
      {3, "x [TOOL_CALLS][{\"name\": \"get_w\", \"arguments\": {\"c\": \"P\"}}, {\"name\": \"f\", \"arguments\": {}}] y"},
      {4, "<tool_call>\n<function=get_w>\n<parameter=c>\nP\n</parameter>\n<parameter=n>\n3\n</parameter>\n</function>\n</tool_call>"},
  };
  int i = 0;
  for (const auto& [format, text] : outputs) seed("tool_calls", "output_" + std::to_string(i++), mode(uint8_t(format | (3 << 3)), text));
}

void request_seeds() {
  const std::string completions[] = {
      R"({"model":"tiny","prompt":"Hello world","max_tokens":8,"temperature":0.7,"top_p":0.9,"stop":["\n"],"seed":3})",
      R"({"prompt":["a","b"],"n":2,"best_of":3,"logprobs":2,"echo":true,"stream":true,"stream_options":{"include_usage":true}})",
      R"({"prompt":[1,2,3,300],"logit_bias":{"5":-100},"max_tokens":1,"min_tokens":1})",
      R"({"prompt":[[1,2],[3]],"stop_token_ids":[4],"ignore_eos":true,"presence_penalty":1.5})",
      R"({"prompt":"x","max_tokens":-1})",
      R"({"prompt":"x","unknown_field":1})",
      R"({"model":"other","prompt":"x"})",
      R"([1,2,3])",
  };
  const std::string chats[] = {
      R"({"model":"tiny","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"max_tokens":16})",
      R"({"messages":[{"role":"user","content":[{"type":"text","text":"part one"},{"type":"text","text":" two"}]}],"logprobs":true,"top_logprobs":3})",
      R"({"messages":[{"role":"user","content":"x"}],"max_completion_tokens":4,"n":2,"stream":true})",
      R"({"messages":[],"max_tokens":1})",
      R"({"messages":[{"role":"user"}]})",
      R"({"messages":[{"role":"user","content":"<|im_end|>"}],"stop":"x","frequency_penalty":-2})",
      R"({"messages":[{"role":"user","content":"w?"}],"tools":[{"type":"function","function":{"name":"get_w","description":"d","parameters":{"type":"object","properties":{"c":{"type":"string"}},"required":["c"]}}}],"tool_choice":"required","parallel_tool_calls":false})",
      R"({"messages":[{"role":"user","content":"w?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_w","arguments":"{\"c\": \"P\", \"a\": [1]}"}}]},{"role":"tool","tool_call_id":"call_1","content":"sunny"}],"tools":[{"type":"function","function":{"name":"get_w"}}],"tool_choice":{"type":"function","function":{"name":"get_w"}}})",
  };
  int i = 0;
  for (const auto& c : completions) {
    seed("openai", "completions_" + std::to_string(i), mode(0, c));
    seed("openai", "completions_sp_" + std::to_string(i++), mode(2, c));
  }
  i = 0;
  for (const auto& c : chats) {
    seed("openai", "chat_" + std::to_string(i), mode(1, c));
    seed("openai", "chat_sp_" + std::to_string(i++), mode(3, c));
  }
  const std::string tgi[] = {
      R"({"inputs":"Hello world","parameters":{"max_new_tokens":8,"temperature":0.5,"top_k":5,"do_sample":true,"seed":1}})",
      R"({"inputs":"x","parameters":{"details":true,"decoder_input_details":true,"return_full_text":true,"stop":["a"],"repetition_penalty":1.2,"top_n_tokens":2}})",
      R"({"inputs":"x","parameters":{"truncate":4,"typical_p":0.5,"watermark":false,"best_of":2}})",
      R"({"inputs":"","parameters":null})",
      R"({"inputs":5})",
      R"({"inputs":"x","stream":true,"parameters":{"max_new_tokens":0}})",
  };
  i = 0;
  for (const auto& t : tgi) {
    seed("tgi", "req_" + std::to_string(i), mode(0, t));
    seed("tgi", "req_sp_" + std::to_string(i++), mode(1, t));
  }
  const std::string sampling[] = {
      R"({"temperature":0.8,"top_k":40,"top_p":0.95,"min_p":0.05,"max_tokens":32,"seed":42})",
      R"({"stop":["\n\n","END"],"stop_token_ids":[2,3],"logit_bias":{"10":5.5,"11":-100},"n":2,"best_of":4})",
      R"({"logprobs":5,"prompt_logprobs":1,"min_tokens":2,"max_tokens":3,"presence_penalty":0.5,"frequency_penalty":0.5,"repetition_penalty":1.1,"ignore_eos":true})",
      R"({"temperature":null,"stop":"one","prompt":"ignored","seed":18446744073709551615})",
      R"({"top_p":0,"n":0})",
      R"({"logit_bias":{"999999":1}})",
      R"({"max_tokens":1e400})",
  };
  i = 0;
  for (const auto& s : sampling) {
    seed("sampling_params", "p_" + std::to_string(i), mode(1, s));
    seed("sampling_params", "p_base_" + std::to_string(i++), mode(2, s));
  }
}

void http_seeds() {
  const std::string steps("\x00\x03\x10\x40", 4);  // piece sizes 1, 4, 17, 65
  auto req = [&](uint8_t m, const std::string& bytes) { return std::string(1, char(m)) + steps + bytes; };
  const std::string body = R"({"prompt":"hello","max_tokens":3})";
  const std::string post = "POST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
                           "Authorization: Bearer k\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  seed("http_parser", "post", req(0, post));
  seed("http_parser", "get_close", req(1, "GET /health HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"));
  seed("http_parser", "chunked", req(0, "POST /generate HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                                        "5;ext=1\r\nhello\r\n0a\r\n, world!!!\r\n0\r\nX-Trailer: t\r\n\r\n"));
  seed("http_parser", "pipelined", req(0, "GET /v1/models HTTP/1.1\r\nHost: a\r\n\r\n" + post +
                                              "\r\nGET /metrics HTTP/1.0\r\n\r\n"));
  seed("http_parser", "expect_continue", req(1, "POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n"
                                                "Content-Length: 4\r\n\r\nabcd"));
  seed("http_parser", "smuggle_cl_te", req(0, "POST / HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"));
  seed("http_parser", "two_cl", req(0, "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"));
  seed("http_parser", "obs_fold", req(0, "GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n"));
  seed("http_parser", "too_big_body", req(1, "POST / HTTP/1.1\r\nContent-Length: 100000\r\n\r\nab"));
  seed("http_parser", "bare_lf", req(0, "GET /a%20b?q HTTP/1.1\nHost: x\n\n"));
}

}  // namespace

int main(int argc, char** argv) {
  g_root = argc > 1 ? fs::path(argv[1]) : fs::current_path();
  if (!fs::exists(g_root / "tests/fuzz")) {
    std::fprintf(stderr, "usage: fuzz_make_corpus [REPO_ROOT]\n");
    return 2;
  }
  gguf_seeds();
  safetensors_seeds();
  tokenizer_seeds();
  jinja_seeds();
  request_seeds();
  tool_call_seeds();
  http_seeds();
  quantized_checkpoint_seeds();
  std::printf("seeds written under %s\n", (g_root / "tests/fuzz/corpus").c_str());
  return 0;
}
