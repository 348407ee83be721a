// A random tiny Llama written as a GGUF file with its linears in GGML block types, for the tests of
// loading quantized linears (test_quantized_load.cpp, test_quantized_forward_cpu.cpp).
#pragma once
#include <doctest/doctest.h>

#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/model/checkpoint.h"
#include "format_test_util.h"
#include "gguf_test_blocks.h"
#include "quant/format/gguf_blocks.h"
#include "quant/format/half_float.h"

namespace llmctl::test::qgguf {


constexpr uint32_t kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13,
                   kQ6_K = 14, kIQ4_NL = 20, kIQ4_XS = 23, kIQ2_XXS = 16, kIQ2_XS = 17, kIQ3_XXS = 18, kIQ1_S = 19,
                   kIQ3_S = 21, kIQ2_S = 22, kIQ1_M = 29, kTQ1_0 = 34, kTQ2_0 = 35;
// Hidden 256 and intermediate 512: the K of every linear is a whole number of 256-element K-quant
// super-blocks. Head dim 64, 4 query heads over 2 KV heads.
constexpr int64_t H = 256, I = 512, V = 64, NH = 4, NKV = 2, HD = 64, L = 2;

// Random blocks of `type` whose f16 scales are +-[0.5, 1) * mag (so that the model's activations
// stay moderate), everything else random bytes.
inline Bytes random_blocks(uint32_t type, int64_t elements, float mag, std::mt19937& rng) {
  quant::GgmlBlockLayout l;
  REQUIRE(quant::ggml_block_layout(type, &l));
  REQUIRE(elements % l.block_size == 0);
  const int64_t nb = elements / l.block_size;
  Bytes b(size_t(nb) * l.type_size);
  for (uint8_t& x : b) x = uint8_t(rng());
  std::vector<size_t> halves;
  switch (type) {
    case kQ4_0: case kQ5_0: case kQ8_0: case kIQ4_NL: case kIQ4_XS: halves = {0}; break;
    case kQ4_1: case kQ5_1: case kQ4_K: case kQ5_K: halves = {0, 2}; break;
    case kQ2_K: halves = {80, 82}; break;
    case kQ3_K: halves = {108}; break;
    case kQ6_K: halves = {208}; break;
    case kIQ2_XXS: case kIQ2_XS: case kIQ2_S: case kIQ3_XXS: case kIQ3_S: case kIQ1_S: halves = {0}; break;
    case kTQ1_0: halves = {52}; break;
    case kTQ2_0: halves = {64}; break;
    case kIQ1_M: break;  // its f16 is the top nibbles of the 16-bit words at bytes 48..55 (below)
    default: FAIL("no scale layout for type " << type);
  }
  std::uniform_real_distribution<float> u(0.5f, 1.0f);
  for (int64_t i = 0; i < nb; ++i) {
    for (size_t off : halves) {
      const uint16_t h = quant::f32_to_half_bits((rng() % 2 ? -1.0f : 1.0f) * u(rng) * mag);
      b[size_t(i) * l.type_size + off] = uint8_t(h), b[size_t(i) * l.type_size + off + 1] = uint8_t(h >> 8);
    }
    if (type == kIQ1_M)
      qtest::put_iq1m_scale(&b[size_t(i) * l.type_size],
                            quant::f32_to_half_bits((rng() % 2 ? -1.0f : 1.0f) * u(rng) * mag));
  }
  return b;
}

// A scale for each type that gives weights of roughly 0.05 in magnitude.
inline float scale_for(uint32_t type) {
  switch (type) {
    case kQ4_0: case kQ4_1: return 0.01f;
    case kQ5_0: case kQ5_1: return 0.005f;
    case kQ8_0: return 0.0005f;
    case kQ2_K: return 0.005f;
    case kQ3_K: return 0.0004f;  // sub-block scales up to 32, codes -4..3
    case kIQ4_NL: return 0.0005f;   // values up to 127
    case kIQ4_XS: return 0.00002f;  // values up to 127, sub-block scales up to 32
    case kQ4_K: case kQ5_K: return 0.0005f;
    case kQ6_K: return 0.00002f;
    case kIQ2_XXS: case kIQ2_XS: case kIQ2_S: return 0.0003f;  // grid values up to 43, sub-block scales up to 3.9
    case kIQ3_XXS: case kIQ3_S: return 0.0001f;                // values up to 62 x 7.75, 15 x 31
    case kIQ1_S: case kIQ1_M: return 0.003f;                   // g + delta up to 1.125, sub-block scales up to 15
    case kTQ1_0: case kTQ2_0: return 0.03f;                    // codes -1..1 (TQ2_0: 2)
  }
  return 0.001f;
}

// The GGUF types of one file: per linear (llama.cpp names without "blk.N."), lm_head (0: tied) and
// the embedding table (0: f32).
struct Layout {
  std::string label;
  std::map<std::string, uint32_t> types;
  uint32_t output = 0;
  uint32_t embed = 0;
};

inline Layout uniform(const std::string& label, uint32_t t) {
  Layout l{label, {}, 0};
  for (const char* n : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}) l.types[n] = t;
  return l;
}

inline Bytes build_gguf(const Layout& layout, uint32_t seed, const std::string& odd_tensor = "", uint32_t odd_type = 0) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto f32 = [&](int64_t n, float mean, float sd) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = mean + sd * nd(rng);
    return f32_bytes(v);
  };
  GgufBuilder g;
  g.kv_str("general.architecture", "llama");
  g.kv_u32("llama.embedding_length", H);
  g.kv_u32("llama.block_count", L);
  g.kv_u32("llama.attention.head_count", NH);
  g.kv_u32("llama.attention.head_count_kv", NKV);
  g.kv_u32("llama.feed_forward_length", I);
  g.kv_u32("llama.vocab_size", V);
  g.kv_u32("llama.context_length", 256);
  if (layout.embed)
    g.tensor("token_embd.weight", layout.embed, {H, V}, random_blocks(layout.embed, H * V, scale_for(layout.embed), rng));
  else
    g.tensor("token_embd.weight", 0, {H, V}, f32(H * V, 0.0f, 1.0f));
  g.tensor("output_norm.weight", 0, {H}, f32(H, 1.0f, 0.1f));
  const std::map<std::string, std::pair<int64_t, int64_t>> nk = {
      {"attn_q", {NH * HD, H}}, {"attn_k", {NKV * HD, H}}, {"attn_v", {NKV * HD, H}}, {"attn_output", {H, NH * HD}},
      {"ffn_gate", {I, H}},     {"ffn_up", {I, H}},        {"ffn_down", {H, I}}};
  for (int64_t i = 0; i < L; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    g.tensor(p + "attn_norm.weight", 0, {H}, f32(H, 1.0f, 0.1f));
    g.tensor(p + "ffn_norm.weight", 0, {H}, f32(H, 1.0f, 0.1f));
    for (const auto& [name, type0] : layout.types) {
      const auto [n, k] = nk.at(name);
      const uint32_t type = p + name == odd_tensor ? odd_type : type0;
      g.tensor(p + name + ".weight", type, {uint64_t(k), uint64_t(n)}, random_blocks(type, n * k, scale_for(type), rng));
    }
  }
  if (layout.output)
    g.tensor("output.weight", layout.output, {H, V}, random_blocks(layout.output, H * V, scale_for(layout.output), rng));
  return g.build();
}

inline std::vector<int32_t> prompt(uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t;
  for (int i = 0; i < 21; ++i) t.push_back(int32_t(rng() % V));
  return t;
}

inline LoadOptions keep() {
  LoadOptions o;
  o.keep_quantized = true;
  return o;
}

}  // namespace llmctl::test::qgguf
