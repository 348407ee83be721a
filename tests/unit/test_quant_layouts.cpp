// Checkpoint layouts of quantized linears (quant/format/checkpoint_layout.h): pack -> unpack identity
// on random weights for every layout x bits x sym/asym x group size, refusals of bad tensors and
// configs, and the reference fixtures of tests/golden/quant/layout_fixtures.* (packed by
// compressed-tensors', AutoAWQ's and GPTQModel's own code, see the script):
// each unpacks to exactly the reference's dequantized values and packs back to the same bytes.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "engine/model/safetensors.h"
#include "kernels/scalar_types.h"
#include "quant/format/checkpoint_layout.h"
#include "quant/format/half_float.h"
#include "skip.h"
#include "source_dir.h"

using namespace llmctl;
using namespace llmctl::quant;
using nlohmann::json;

namespace {

using Packed = std::vector<std::pair<std::string, PackedTensor>>;

std::map<std::string, PackedTensorView> views(const Packed& p) {
  std::map<std::string, PackedTensorView> m;
  for (const auto& [name, t] : p) m[name] = view_of(t);
  return m;
}

// Codes, zero points (GPTQ v1 cannot hold 0) and f16-representable scales, seeded.
QuantizedLinear random_linear(int64_t n, int64_t k, QuantScheme s, uint32_t seed, bool zero_ok, bool act_order = false) {
  std::mt19937 rng(seed);
  QuantizedLinear w;
  w.n = n;
  w.k = k;
  w.scheme = s;
  const int64_t G = w.groups();
  std::uniform_int_distribution<int> code(0, s.max_code()), zero(zero_ok ? 0 : 1, s.max_code());
  std::uniform_real_distribution<float> lg(-7.f, -2.f);
  w.q.resize(size_t(n * k));
  for (auto& c : w.q) c = uint8_t(code(rng));
  w.scales.resize(size_t(n * G));
  for (auto& x : w.scales) x = half_bits_to_f32(f32_to_half_bits(std::exp(lg(rng))));
  w.zeros.resize(size_t(n * G));
  for (auto& z : w.zeros) z = s.symmetric ? s.sym_zero() : zero(rng);
  if (act_order) {
    w.g_idx.resize(size_t(k));
    for (int64_t c = 0; c < k; ++c) w.g_idx[size_t(c)] = int32_t(s.group_size <= 0 ? 0 : c / s.group_size);
    std::shuffle(w.g_idx.begin(), w.g_idx.end(), rng);
  }
  return w;
}

QuantConfigInfo info_for(QuantLayout l, QuantScheme s, bool act_order = false) {
  QuantConfigInfo info;
  info.layout = l;
  info.scheme = s;
  info.act_order = act_order;
  info.ignore = {"lm_head"};
  return info;
}

void check_same(const QuantizedLinear& a, const QuantizedLinear& b) {
  CHECK(a.n == b.n);
  CHECK(a.k == b.k);
  CHECK(a.q == b.q);
  CHECK(a.zeros == b.zeros);
  CHECK(a.scales == b.scales);
  CHECK(a.g_idx == b.g_idx);
  CHECK(dequantize(a) == dequantize(b));
}

void check_same_bytes(const Packed& a, const Packed& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    CHECK(a[i].first == b[i].first);
    CHECK(a[i].second.dtype == b[i].second.dtype);
    CHECK(a[i].second.shape == b[i].second.shape);
    CHECK(a[i].second.bytes == b[i].second.bytes);
  }
}

}  // namespace

TEST_CASE("quant layouts: half conversions agree with the engine's") {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float a = half_bits_to_f32(uint16_t(h)), b = f16_to_f32(uint16_t(h));
    if (std::isnan(b)) CHECK(std::isnan(a));
    else REQUIRE(std::memcmp(&a, &b, 4) == 0);
    const float c = bf16_bits_to_f32(uint16_t(h)), d = bf16_to_f32(uint16_t(h));
    if (!std::isnan(d)) REQUIRE(std::memcmp(&c, &d, 4) == 0);
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    uint32_t x = bits(rng);
    if (i % 3 == 0) x = (x & 0x807fffffu) | ((100u + x % 50u) << 23);  // around the f16 range and subnormals
    float f;
    std::memcpy(&f, &x, 4);
    if (std::isnan(f)) continue;
    INFO(x);
    REQUIRE(f32_to_half_bits(f) == f32_to_f16(f));
    REQUIRE(f32_to_bf16_bits(f) == f32_to_bf16(f));
  }
}

TEST_CASE("quant layouts: names and configs round-trip") {
  for (QuantLayout l : {QuantLayout::CompressedTensors, QuantLayout::AutoAwqGemm, QuantLayout::Gptq})
    CHECK(parse_quant_layout(quant_layout_name(l)) == l);
  CHECK_THROWS_WITH_AS(parse_quant_layout("exl2"), doctest::Contains("compressed-tensors, awq, gptq"), std::invalid_argument);

  for (QuantLayout l : {QuantLayout::CompressedTensors, QuantLayout::AutoAwqGemm, QuantLayout::Gptq})
    for (int bits : {4, 8})
      for (bool sym : {true, false})
        for (int group : {32, 64, -1})
          for (bool act : {false, true}) {
            QuantConfigInfo info = info_for(l, QuantScheme{bits, group, sym}, act);
            INFO(info.label());
            if (l == QuantLayout::AutoAwqGemm && (bits == 8 || act)) {
              if (bits == 8) CHECK_THROWS_AS(make_quantization_config(info), std::invalid_argument);
              continue;
            }
            const json qc = make_quantization_config(info);
            const QuantConfigInfo back = parse_quantization_config(qc);
            CHECK(back.layout == l);
            CHECK(back.scheme.bits == bits);
            CHECK(back.scheme.group_size == group);
            CHECK(back.scheme.symmetric == (l == QuantLayout::AutoAwqGemm ? false : sym));  // AWQ GEMM: zero points always
            CHECK(back.act_order == act);
            CHECK(back.ignore == std::vector<std::string>{"lm_head"});
          }
  // What the reference tools write, key for key.
  const json ct = make_quantization_config(info_for(QuantLayout::CompressedTensors, QuantScheme{4, 32, true}));
  CHECK(ct["format"] == "pack-quantized");
  CHECK(ct["quantization_status"] == "compressed");
  CHECK(ct["config_groups"]["group_0"]["weights"]["strategy"] == "group");
  CHECK(ct["kv_cache_scheme"].is_null());
  const json awq = make_quantization_config(info_for(QuantLayout::AutoAwqGemm, QuantScheme{4, 64, false}));
  CHECK(awq == json{{"bits", 4}, {"group_size", 64}, {"modules_to_not_convert", {"lm_head"}}, {"quant_method", "awq"},
                    {"version", "gemm"}, {"zero_point", true}});
  const json gptq = make_quantization_config(info_for(QuantLayout::Gptq, QuantScheme{4, 128, true}));
  CHECK(gptq["checkpoint_format"] == "gptq");
  CHECK(gptq["desc_act"] == false);
  CHECK(gptq["lm_head"] == false);
  // kv_cache_scheme passes through both ways
  QuantConfigInfo kv = info_for(QuantLayout::CompressedTensors, QuantScheme{4, 32, true});
  kv.kv_cache_scheme = {{"num_bits", 8}, {"type", "float"}, {"strategy", "tensor"}, {"dynamic", false}, {"symmetric", true}};
  CHECK(parse_quantization_config(make_quantization_config(kv)).kv_cache_scheme == kv.kv_cache_scheme);
}

TEST_CASE("quant layouts: ignore list, exact and re: patterns") {
  QuantConfigInfo info;
  info.ignore = {"lm_head", "re:.*mlp\\.down_proj$"};
  CHECK(info.ignores("lm_head"));
  CHECK(info.ignores("model.layers.3.mlp.down_proj"));
  CHECK_FALSE(info.ignores("model.layers.3.mlp.up_proj"));
  CHECK_FALSE(info.ignores("model.lm_head_x"));
  json qc = make_quantization_config(info_for(QuantLayout::CompressedTensors, QuantScheme{4, 32, true}));
  qc["ignore"] = {"re:(unclosed"};
  CHECK_THROWS_WITH_AS(parse_quantization_config(qc), doctest::Contains("not a valid regular expression"),
                       std::invalid_argument);
}

TEST_CASE("quant layouts: unsupported quantization_config refused by name") {
  auto refused = [](const json& qc, const char* needle) {
    INFO(qc.dump());
    CHECK_THROWS_WITH_AS(parse_quantization_config(qc), doctest::Contains(needle), std::invalid_argument);
  };
  json ct = make_quantization_config(info_for(QuantLayout::CompressedTensors, QuantScheme{4, 32, true}));
  refused({{"quant_method", "fp8"}, {"activation_scheme", "dynamic"}}, "'fp8' is not supported");
  refused({{"quant_method", "bitsandbytes"}, {"load_in_4bit", true}}, "'bitsandbytes' is not supported");
  refused(json::array(), "not a JSON object");
  refused(json::object(), "quant_method");
  json x = ct;
  x["format"] = "float-quantized";
  x["config_groups"]["group_0"].erase("format");
  refused(x, "float-quantized");
  x = ct;
  x["config_groups"]["group_0"]["input_activations"] = {{"num_bits", 8}, {"type", "int"}};
  refused(x, "activations");
  x = ct;
  x["config_groups"]["group_0"]["weights"]["num_bits"] = 2;
  refused(x, "2-bit");
  x = ct;
  x["config_groups"]["group_0"]["weights"]["type"] = "float";
  refused(x, "'float'");
  x = ct;
  x["quantization_status"] = "frozen";
  refused(x, "frozen");
  x = ct;
  x["config_groups"]["group_0"]["weights"]["strategy"] = "tensor";
  refused(x, "'tensor'");
  x = ct;
  x["config_groups"]["group_0"]["weights"]["group_size"] = -5;
  refused(x, "out of range");
  x = ct;  // 2^63 does not fit int64: named as written, not wrapped to a negative number
  x["config_groups"]["group_0"]["weights"]["num_bits"] = uint64_t(1) << 63;
  refused(x, "'num_bits' = 9223372036854775808 is out of range");
  x = ct;
  x["ignore"] = json::array({1, 2});
  refused(x, "ignore");
  json awq = make_quantization_config(info_for(QuantLayout::AutoAwqGemm, QuantScheme{4, 64, false}));
  awq["version"] = "GEMV";
  refused(awq, "'gemv'");
  awq["version"] = "gemm";
  awq["zero_point"] = false;
  refused(awq, "zero points");
  json gptq = make_quantization_config(info_for(QuantLayout::Gptq, QuantScheme{4, 128, true}));
  gptq["checkpoint_format"] = "gptq_v2";
  refused(gptq, "gptq_v2");
  gptq["checkpoint_format"] = "gptq";
  gptq["bits"] = 3;
  refused(gptq, "3-bit");
  gptq["bits"] = "4";
  refused(gptq, "integer");
}

TEST_CASE("quant layouts: pack -> unpack identity, every layout x bits x sym x group") {
  struct Shape {
    int64_t n, k;
  };
  uint32_t seed = 1;
  for (QuantLayout l : {QuantLayout::CompressedTensors, QuantLayout::AutoAwqGemm, QuantLayout::Gptq})
    for (int bits : {4, 8})
      for (bool sym : {true, false})
        for (int group : {32, 64, -1})
          for (bool act : {false, true}) {
            // only GPTQ stores a g_idx llmctl writes; per channel every column is in group 0 anyway
            if (act && (l != QuantLayout::Gptq || group == -1)) continue;
            const QuantScheme s{bits, group, sym};
            // odd shapes where the layout allows: compressed-tensors packs partial words
            std::vector<Shape> shapes;
            if (l == QuantLayout::CompressedTensors) shapes = {{20, 128}, {13, 192}, {1, 64}};
            else shapes = {{32, 128}, {64, 192}};
            if (l == QuantLayout::CompressedTensors && group == -1) shapes.push_back({7, 36});
            if (l == QuantLayout::Gptq && group == -1) shapes.push_back({8, 40});
            for (const Shape& sh : shapes) {
              QuantizedLinear w = random_linear(sh.n, sh.k, s, seed++, l != QuantLayout::Gptq, act);
              if (l == QuantLayout::AutoAwqGemm && bits == 8) {
                CHECK_THROWS_WITH_AS(pack_linear_weight(l, w, "F16"), doctest::Contains("4-bit"), std::invalid_argument);
                continue;
              }
              const QuantConfigInfo info = parse_quantization_config(make_quantization_config(info_for(l, s, act)));
              INFO(info.label() << " act-order " << act << " [" << sh.n << ", " << sh.k << "]");
              for (const char* sd : {"F16", "BF16", "F32"}) {
                if (l != QuantLayout::CompressedTensors && std::string(sd) != "F16") continue;
                QuantizedLinear ws = w;
                if (std::string(sd) == "BF16")
                  for (auto& x : ws.scales) x = bf16_bits_to_f32(f32_to_bf16_bits(x));
                const Packed p = pack_linear_weight(l, ws, sd);
                const QuantizedLinear back = unpack_linear_weight(l, info, sh.n, sh.k, views(p));
                check_same(ws, back);
                check_same_bytes(p, pack_linear_weight(l, back, sd));
              }
            }
          }
}

TEST_CASE("slice_linear_rows: a module's rows cut from its packed tensors unpack as those rows of the whole") {
  int checked = 0, refused = 0;
  for (QuantLayout l : {QuantLayout::CompressedTensors, QuantLayout::AutoAwqGemm, QuantLayout::Gptq})
    for (int bits : {4, 8})
      for (bool sym : {true, false}) {
        if (l == QuantLayout::AutoAwqGemm && bits == 8) continue;
        const QuantScheme s{bits, 32, sym};
        const bool act = l == QuantLayout::Gptq && !sym;  // a g_idx travels whole
        const QuantConfigInfo info = parse_quantization_config(make_quantization_config(info_for(l, s, act)));
        for (int64_t n : {48, 20}) {
          if (n % 8 && l != QuantLayout::CompressedTensors) continue;
          const int64_t k = 128;
          const QuantizedLinear w = random_linear(n, k, s, uint32_t(100 + bits + 10 * n + 3 * int(l)), l != QuantLayout::Gptq, act);
          const Packed p = pack_linear_weight(l, w, "F16");
          const QuantizedLinear whole = unpack_linear_weight(l, info, n, k, views(p));
          const std::vector<std::vector<IndexRange>> sets = {
              {{0, 16}}, {{8, 8}, {16, std::min<int64_t>(8, n - 16)}}, {{8, n - 8}}, {{16, n - 16}, {0, 8}}, {{3, 5}}};
          for (const auto& ranges : sets) {
            INFO(info.label() << " act-order " << act << " n " << n << ", " << ranges.size() << " ranges from "
                              << ranges[0].first);
            std::vector<std::vector<uint8_t>> storage;
            const auto cut = slice_linear_rows(l, info, n, k, views(p), ranges, storage);
            // rows packed into int32s (AWQ, GPTQ, compressed-tensors' asymmetric zero points) cut
            // only on whole int32s: 32 / bits rows
            const bool packed_rows = l != QuantLayout::CompressedTensors || !sym;
            const int per = 32 / bits;
            bool whole_words = true;
            for (size_t i = 0; i < ranges.size(); ++i) {
              const auto& [b, len] = ranges[i];
              whole_words &= b % per == 0 && (len % per == 0 || (b + len == n && i + 1 == ranges.size()));
            }
            CHECK(bool(cut) == (!packed_rows || whole_words));
            if (!cut) {
              ++refused;
              continue;
            }
            int64_t rows = 0;
            for (const auto& r : ranges) rows += r.second;
            const QuantizedLinear got = unpack_linear_weight(l, info, rows, k, *cut);
            const int64_t G = whole.groups();
            int64_t at = 0;
            for (const auto& [b, len] : ranges)
              for (int64_t r = b; r < b + len; ++r, ++at) {
                CHECK(std::equal(got.q.begin() + at * k, got.q.begin() + (at + 1) * k, whole.q.begin() + r * k));
                CHECK(std::equal(got.scales.begin() + at * G, got.scales.begin() + (at + 1) * G, whole.scales.begin() + r * G));
                CHECK(std::equal(got.zeros.begin() + at * G, got.zeros.begin() + (at + 1) * G, whole.zeros.begin() + r * G));
              }
            CHECK(got.g_idx == whole.g_idx);
            ++checked;
          }
        }
      }
  CHECK(checked > 20);
  CHECK(refused > 4);
}

TEST_CASE("slice_linear_columns: a module's input columns cut from its packed tensors unpack as those columns of the whole") {
  int checked = 0, refused = 0;
  for (QuantLayout l : {QuantLayout::CompressedTensors, QuantLayout::AutoAwqGemm, QuantLayout::Gptq})
    for (int bits : {4, 8})
      for (bool sym : {true, false})
        for (int group : {32, 64, -1})
          for (bool act : {false, true}) {
            if ((l == QuantLayout::AutoAwqGemm && bits == 8) || (act && (l != QuantLayout::Gptq || group == -1))) continue;
            const QuantScheme s{bits, group, sym};
            const QuantConfigInfo info = parse_quantization_config(make_quantization_config(info_for(l, s, act)));
            // k = 36: a compressed-tensors per-channel module whose last packed int32 is partly used
            const bool short_k = l == QuantLayout::CompressedTensors && group == -1;
            const int64_t n = 16, k = short_k ? 36 : 192;
            const uint32_t seed = uint32_t(300 + bits + 7 * group + 3 * int(l) + sym);
            const QuantizedLinear w = random_linear(n, k, s, seed, l != QuantLayout::Gptq, act);
            const Packed p = pack_linear_weight(l, w, "F16");
            const QuantizedLinear whole = unpack_linear_weight(l, info, n, k, views(p));
            std::vector<std::vector<IndexRange>> sets;
            if (short_k) sets = {{{32, 4}}, {{8, 8}, {32, 4}}, {{0, 32}}, {{4, 8}}, {{32, 4}, {0, 8}}};
            else
              sets = {{{0, 64}},  {{64, 128}}, {{128, 64}, {0, 64}}, {{0, 32}, {96, 32}},
                      {{16, 32}}, {{160, 32}}, {{8, 4}}};
            const int64_t unit = linear_column_unit(l, info);
            CHECK(unit == (group > 0 ? group : l == QuantLayout::AutoAwqGemm ? 1 : 32 / bits));
            for (const auto& ranges : sets) {
              INFO(info.label() << " act-order " << act << " k " << k << ", " << ranges.size() << " ranges from "
                                << ranges[0].first << " length " << ranges[0].second);
              std::vector<std::vector<uint8_t>> storage;
              const auto cut = slice_linear_columns(l, info, n, k, views(p), ranges, storage);
              bool on_units = true;  // each range starts on a unit and ends on one or at the end
              for (size_t i = 0; i < ranges.size(); ++i) {
                const auto& [b, len] = ranges[i];
                on_units &= b % unit == 0 && (len % unit == 0 || (b + len == k && i + 1 == ranges.size()));
              }
              CHECK(bool(cut) == (on_units && !act));  // a shuffled g_idx: the whole module
              if (!cut) {
                ++refused;
                continue;
              }
              int64_t cols = 0;
              for (const auto& r : ranges) cols += r.second;
              const QuantizedLinear got = unpack_linear_weight(l, info, n, cols, *cut);
              CHECK(got.g_idx.empty());
              const int64_t G = whole.groups(), Gc = got.groups();
              for (int64_t r = 0; r < n; ++r) {
                int64_t at = 0;  // column in got
                for (const auto& [b, len] : ranges)
                  for (int64_t c = b; c < b + len; ++c, ++at) {
                    CHECK(got.q[size_t(r * cols + at)] == whole.q[size_t(r * k + c)]);
                    const int64_t g = group > 0 ? c / group : 0, gc = group > 0 ? at / group : 0;
                    CHECK(got.scales[size_t(r * Gc + gc)] == whole.scales[size_t(r * G + g)]);
                    CHECK(got.zeros[size_t(r * Gc + gc)] == whole.zeros[size_t(r * G + g)]);
                  }
              }
              ++checked;
            }
          }
  CHECK(checked > 60);
  CHECK(refused > 20);
}

TEST_CASE("quant layouts: the layouts' limits and bad tensors are refused by name") {
  const QuantScheme s4{4, 32, false};
  // compressed-tensors stores no g_idx; AWQ needs N % 8; GPTQ v1 cannot hold a zero point of 0
  CHECK_THROWS_WITH_AS(pack_linear_weight(QuantLayout::CompressedTensors, random_linear(8, 64, s4, 1, true, true), "F16"),
                       doctest::Contains("g_idx"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(pack_linear_weight(QuantLayout::AutoAwqGemm, random_linear(12, 64, s4, 2, true), "F16"),
                       doctest::Contains("divisible by 8"), std::invalid_argument);
  QuantizedLinear z0 = random_linear(8, 64, s4, 3, false);
  z0.zeros[5] = 0;
  CHECK_THROWS_WITH_AS(pack_linear_weight(QuantLayout::Gptq, z0, "F16"), doctest::Contains("zero point of 0"),
                       std::invalid_argument);
  QuantizedLinear nan = random_linear(8, 64, s4, 4, true);
  nan.scales[0] = NAN;
  CHECK_THROWS_AS(pack_linear_weight(QuantLayout::CompressedTensors, nan, "F16"), std::invalid_argument);

  auto refused = [](QuantLayout l, const QuantScheme& s, int64_t n, int64_t k, const Packed& p, const char* needle) {
    const QuantConfigInfo info = parse_quantization_config(make_quantization_config(info_for(l, s)));
    CHECK_THROWS_WITH_AS(unpack_linear_weight(l, info, n, k, views(p)), doctest::Contains(needle), std::invalid_argument);
  };
  auto find = [](Packed& p, const std::string& name) -> PackedTensor& {
    for (auto& [n, t] : p)
      if (n == name) return t;
    FAIL("no tensor " << name);
    throw 0;
  };
  const QuantizedLinear w = random_linear(16, 64, s4, 5, false);
  for (QuantLayout l : {QuantLayout::CompressedTensors, QuantLayout::AutoAwqGemm, QuantLayout::Gptq}) {
    const Packed good = pack_linear_weight(l, w, "F16");
    const std::string qname = l == QuantLayout::CompressedTensors ? "weight_packed" : "qweight";
    Packed p = good;
    p.erase(p.begin());
    refused(l, s4, 16, 64, p, ("missing tensor '" + good.front().first + "'").c_str());
    p = good;
    find(p, qname).dtype = "F32";
    refused(l, s4, 16, 64, p, "expected I32");
    p = good;
    find(p, qname).shape[0] += 1;
    refused(l, s4, 16, 64, p, ("'" + qname + "' has shape").c_str());
    refused(l, s4, 32, 64, good, "shape");  // the config implies another N
    p = good;
    find(p, l == QuantLayout::CompressedTensors ? "weight_scale" : "scales").bytes.pop_back();
    refused(l, s4, 16, 64, p, "bytes");
  }
  Packed ct = pack_linear_weight(QuantLayout::CompressedTensors, w, "F16");
  find(ct, "weight_shape") = make_i64({2}, {16, 32});
  refused(QuantLayout::CompressedTensors, s4, 16, 64, ct, "weight_shape");
  Packed gq = pack_linear_weight(QuantLayout::Gptq, w, "F16");
  find(gq, "g_idx") = make_i32({64}, std::vector<int32_t>(64, 2));
  refused(QuantLayout::Gptq, s4, 16, 64, gq, "out of range");
  gq = pack_linear_weight(QuantLayout::Gptq, w, "F16");
  find(gq, "qzeros").bytes.assign(find(gq, "qzeros").bytes.size(), 0xff);  // every zero - 1 == 15
  refused(QuantLayout::Gptq, s4, 16, 64, gq, "qzeros");
}

TEST_CASE("quant layouts: compressed-tensors zero points stored unpacked as signed int8 (older writers)") {
  for (int bits : {4, 8}) {
    const QuantScheme s{bits, 32, false};
    const QuantizedLinear w = random_linear(10, 64, s, 40 + bits, true);
    Packed p = pack_linear_weight(QuantLayout::CompressedTensors, w, "F32");
    std::vector<int8_t> signed_zp(w.zeros.size());
    for (size_t i = 0; i < w.zeros.size(); ++i) signed_zp[i] = int8_t(w.zeros[i] - s.sym_zero());
    for (auto& [name, t] : p)
      if (name == "weight_zero_point") {
        t.dtype = "I8";
        t.shape = {10, 2};
        t.bytes.assign(reinterpret_cast<const uint8_t*>(signed_zp.data()),
                       reinterpret_cast<const uint8_t*>(signed_zp.data()) + signed_zp.size());
      }
    const QuantConfigInfo info = parse_quantization_config(make_quantization_config(info_for(QuantLayout::CompressedTensors, s)));
    check_same(w, unpack_linear_weight(QuantLayout::CompressedTensors, info, 10, 64, views(p)));
  }
}

TEST_CASE("quant layouts: reference fixtures unpack exactly and pack back to the same bytes") {
  const std::string dir = std::string(llmctl::test::source_dir()) + "/tests/golden/quant/";
  if (!std::filesystem::exists(dir + "layout_fixtures.json")) LLMCTL_SKIP("tests/golden/quant/layout_fixtures.json absent");
  std::ifstream in(dir + "layout_fixtures.json");
  const json meta = json::parse(in);
  auto file = SafetensorsFile::open(dir + "layout_fixtures.safetensors");
  std::map<std::string, int> per_layout;
  for (const json& fx : meta["fixtures"]) {
    const std::string name = fx["name"];
    INFO(name << " (" << fx["source"].get<std::string>() << ")");
    const QuantConfigInfo info = parse_quantization_config(fx["quantization_config"]);
    CHECK(std::string(quant_layout_name(info.layout)) == fx["layout"].get<std::string>());
    const int64_t n = fx["n"], k = fx["k"];
    std::map<std::string, PackedTensorView> by;
    std::vector<std::string> order;
    for (const auto& [tname, t] : file->tensors()) {
      if (tname.rfind(name + ".", 0) != 0 || tname == name + ".dequant") continue;
      by[tname.substr(name.size() + 1)] = {safetensors_dtype_name(t.dtype), t.shape,
                                           static_cast<const uint8_t*>(t.data), t.nbytes()};
    }
    const QuantizedLinear w = unpack_linear_weight(info.layout, info, n, k, by);
    const Tensor& ref = file->get(name + ".dequant");
    REQUIRE(ref.shape == std::vector<int64_t>{n, k});
    const std::vector<float> ours = dequantize(w);
    size_t diff = 0;
    for (size_t i = 0; i < ours.size(); ++i) diff += std::memcmp(&ours[i], ref.ptr<float>() + i, 4) != 0;
    CHECK(diff == 0);
    // Packing the unpacked weight gives the reference's bytes back (scales in the stored dtype).
    const std::string scale_dtype = by.count("weight_scale") ? by["weight_scale"].dtype : "F16";
    const Packed again = pack_linear_weight(info.layout, w, scale_dtype);
    CHECK(again.size() == by.size());
    for (const auto& [suffix, t] : again) {
      INFO(suffix);
      REQUIRE(by.count(suffix) == 1);
      CHECK(t.dtype == by[suffix].dtype);
      CHECK(t.shape == by[suffix].shape);
      CHECK((t.bytes.size() == by[suffix].nbytes && std::memcmp(t.bytes.data(), by[suffix].data, t.bytes.size()) == 0));
    }
    ++per_layout[fx["layout"].get<std::string>()];
  }
  CHECK(per_layout["compressed-tensors"] >= 4);
  CHECK(per_layout["awq"] >= 2);
  CHECK(per_layout["gptq"] >= 3);
}
