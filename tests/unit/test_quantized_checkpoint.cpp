// load_checkpoint of quantized HF directories (engine/model/quantized_checkpoint.h): a random tiny
// Llama whose linears are packed in each layout (compressed-tensors, AutoAWQ GEMM, GPTQ) loads with
// every linear dense f32 and equal, bit for bit, to the dequantized QuantizedLinear it was packed
// from; dense modules (ignored) stay as they are; inconsistent checkpoints are refused by name.
// With LoadOptions::keep_quantized the linears stay quantized (GroupAffineWeight, the same values
// up to f32 rounding), the model built from them loads canonical Int4Group / Int8Group weights and
// gives the dense checkpoint's logits within rounding; act-order g_idx weights load dense with a note.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "engine/core/error.h"
#include "engine/model/checkpoint.h"
#include "engine/model/random_checkpoint.h"
#include "engine/model/registry.h"
#include "engine/model/safetensors.h"
#include "engine/model/weights/load_weights.h"
#include "format_test_util.h"
#include "quant/format/checkpoint_layout.h"
#include "quant/format/half_float.h"
#include "quant_load_util.h"
#include "tiny_config.h"

using namespace llmctl;
using namespace llmctl::test;
using nlohmann::json;

namespace {

DType dtype_of(const std::string& name) {
  if (name == "I32") return DType::I32;
  if (name == "I64") return DType::I64;
  if (name == "F16") return DType::F16;
  if (name == "BF16") return DType::BF16;
  REQUIRE(name == "F32");
  return DType::F32;
}

Tensor to_tensor(const quant::PackedTensor& p) {
  Tensor t = Tensor::empty_host(dtype_of(p.dtype), p.shape);
  std::memcpy(t.data, p.bytes.data(), p.bytes.size());
  return t;
}

quant::QuantizedLinear random_linear(int64_t n, int64_t k, const quant::QuantScheme& s, std::mt19937& rng) {
  quant::QuantizedLinear w;
  w.n = n;
  w.k = k;
  w.scheme = s;
  const int64_t G = w.groups();
  std::uniform_int_distribution<int> code(0, s.max_code()), zero(1, s.max_code());
  std::uniform_real_distribution<float> mag(0.01f, 0.05f);
  for (int64_t i = 0; i < n * k; ++i) w.q.push_back(uint8_t(code(rng)));
  for (int64_t i = 0; i < n * G; ++i) {
    w.scales.push_back(quant::half_bits_to_f32(quant::f32_to_half_bits(mag(rng))));
    w.zeros.push_back(s.symmetric ? s.sym_zero() : zero(rng));
  }
  return w;
}

struct Written {
  std::map<std::string, std::vector<float>> expected;  // "<prefix>.weight" -> dequantized [N, K]
  std::map<std::string, Tensor> tensors;
};

// How quantize_checkpoint sets g_idx:
//   None        no g_idx (column k in group k / group_size)
//   ActOrder    GPTQ desc_act without static groups: a shuffled order, groups of group_size columns
//               in it, so each group's columns are scattered; modules with one input (q/k/v,
//               gate/up) share the order, as GPTQ's (from the same Hessian) does
//   PerModule   the same, but a different order for every module (the fused parts then differ)
//   Uneven      groups of different sizes (group 0 three quarters of the columns)
enum class GIdx { None, ActOrder, PerModule, Uneven };

// Packs every linear of a random checkpoint except `dense_module` in layout info.layout.
Written quantize_checkpoint(const ModelConfig& c, const quant::QuantConfigInfo& info, const std::string& dense_module,
                            GIdx g_idx = GIdx::None) {
  Checkpoint ck = random_checkpoint(c, 11, 0.05f);
  std::mt19937 rng(5);
  std::map<std::string, std::vector<int32_t>> orders;  // by the module's input
  Written out;
  for (auto& [name, t] : ck.tensors) {
    const bool linear = name.find("_proj.weight") != std::string::npos;
    const std::string prefix = name.substr(0, name.size() - std::string(".weight").size());
    if (!linear || prefix == dense_module) {
      out.tensors[name] = t;
      continue;
    }
    quant::QuantizedLinear w = random_linear(t.shape[0], t.shape[1], info.scheme, rng);
    if (g_idx == GIdx::ActOrder || g_idx == GIdx::PerModule) {
      std::string input = prefix;  // q/k/v and gate/up read the same input
      for (const char* shared : {"q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"})
        if (const size_t at = input.find(shared); at != std::string::npos && g_idx == GIdx::ActOrder)
          input = input.substr(0, at) + (shared[0] == 'g' || shared[0] == 'u' ? "mlp_in" : "attn_in");
      std::vector<int32_t>& perm = orders[input];
      if (perm.empty()) {
        perm.resize(size_t(w.k));
        for (int64_t i = 0; i < w.k; ++i) perm[size_t(i)] = int32_t(i);
        std::shuffle(perm.begin(), perm.end(), rng);
      }
      for (int64_t i = 0; i < w.k; ++i) w.g_idx.push_back(perm[size_t(i)] / info.scheme.group_size);
    } else if (g_idx == GIdx::Uneven) {
      const int64_t G = w.k / info.scheme.group_size;
      for (int64_t i = 0; i < w.k; ++i) w.g_idx.push_back(int32_t(i < w.k * 3 / 4 ? 0 : G - 1));
    }
    out.expected[name] = quant::dequantize(w);
    for (auto& [suffix, p] : quant::pack_linear_weight(info.layout, w, "F32"))
      out.tensors[prefix + "." + suffix] = to_tensor(p);
  }
  return out;
}

// GPTQ int4 g32 symmetric with act-order (desc_act).
quant::QuantConfigInfo gptq_act_order_info() {
  quant::QuantConfigInfo info;
  info.layout = quant::QuantLayout::Gptq;
  info.scheme = {4, 32, true};
  info.act_order = true;
  return info;
}

// A kept weight dequantized against the checkpoint's own dequantization: (q - z) * s vs
// s * q + (-z * s), f32 rounding only.
void check_rounding_close(const std::vector<float>& got, const std::vector<float>& values) {
  REQUIRE(got.size() == values.size());
  double worst = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::fabs(double(got[i]) - values[i]));
    scale = std::max(scale, std::fabs(double(values[i])));
  }
  CHECK(worst <= scale * 1e-6);
}

void write_dir(const ScratchDir& dir, const ModelConfig& c, const json& qc, const std::map<std::string, Tensor>& t) {
  json cfg = c.to_hf_json();
  if (!qc.is_null()) cfg["quantization_config"] = qc;
  write_text(dir.file("config.json"), cfg.dump());
  write_safetensors(dir.file("model.safetensors"), {t.begin(), t.end()});
}

}  // namespace

TEST_CASE("quantized checkpoint: every layout loads as the dequantized weights") {
  const ModelConfig c = tiny_llama_config(64, 2, 16);  // hidden 64, intermediate 96: group 32 divides both
  struct Case {
    quant::QuantLayout layout;
    quant::QuantScheme scheme;
  };
  const Case cases[] = {{quant::QuantLayout::CompressedTensors, {4, 32, true}},
                        {quant::QuantLayout::CompressedTensors, {8, -1, false}},
                        {quant::QuantLayout::AutoAwqGemm, {4, 32, false}},
                        {quant::QuantLayout::Gptq, {4, 32, true}},
                        {quant::QuantLayout::Gptq, {8, 32, false}}};
  for (const Case& cs : cases) {
    quant::QuantConfigInfo info;
    info.layout = cs.layout;
    info.scheme = cs.scheme;
    info.ignore = {"lm_head", "model.layers.1.mlp.down_proj"};
    INFO(info.label());
    const Written w = quantize_checkpoint(c, info, "model.layers.1.mlp.down_proj");
    ScratchDir dir("qck");
    write_dir(dir, c, quant::make_quantization_config(info), w.tensors);
    const Checkpoint ck = load_checkpoint(dir.path.string());
    REQUIRE(ck.config.source_quantization.has_value());
    CHECK(ck.config.source_quantization->layout == cs.layout);
    CHECK(ck.config.source_quantization->scheme.bits == cs.scheme.bits);
    CHECK(w.expected.size() == 13);  // 7 linears x 2 layers, one left dense
    for (const auto& [name, values] : w.expected) {
      INFO(name);
      const Tensor& t = ck.get(name);
      REQUIRE(t.dtype == DType::F32);
      CHECK(std::memcmp(t.data, values.data(), values.size() * 4) == 0);
    }
    const Tensor& dense = ck.get("model.layers.1.mlp.down_proj.weight");  // ignored: as stored
    CHECK(std::memcmp(dense.data, w.tensors.at("model.layers.1.mlp.down_proj.weight").data, dense.nbytes()) == 0);
    for (const auto& [name, t] : ck.tensors) {
      INFO(name);
      CHECK(name.find("qweight") == std::string::npos);
      CHECK(name.find("weight_packed") == std::string::npos);
      CHECK(name.find("scale") == std::string::npos);
    }
  }
}

TEST_CASE("quantized checkpoint: inconsistent checkpoints are refused by name") {
  const ModelConfig c = tiny_llama_config(64, 2, 16);
  quant::QuantConfigInfo info;
  info.layout = quant::QuantLayout::Gptq;
  info.scheme = {4, 32, true};
  const json qc = quant::make_quantization_config(info);
  const Written w = quantize_checkpoint(c, info, "");
  ScratchDir dir("qck_bad");

  auto refused = [&](const std::map<std::string, Tensor>& t, const json& q, const char* needle) {
    write_dir(dir, c, q, t);
    CHECK_THROWS_WITH_AS(load_checkpoint(dir.path.string()), doctest::Contains(needle), InputError);
  };
  // packed and dense at once
  auto both = w.tensors;
  both["model.layers.0.self_attn.q_proj.weight"] = Tensor::zeros_host(DType::F32, {64, 64});
  refused(both, qc, "both quantized and dense");
  // a quantized module the model does not have
  auto extra = w.tensors;
  extra["model.layers.7.mlp.up_proj.qweight"] = w.tensors.at("model.layers.0.mlp.up_proj.qweight");
  refused(extra, qc, "model.layers.7.mlp.up_proj.qweight");
  // a quantization_config with no packed tensor
  refused(random_checkpoint(c, 1, 0.05f).tensors, qc, "no tensor is named");
  // a tensor of the wrong shape, named with its module
  auto bad = w.tensors;
  bad["model.layers.1.self_attn.o_proj.scales"] = Tensor::zeros_host(DType::F16, {1, 64});
  refused(bad, qc, "model.layers.1.self_attn.o_proj");
  {  // kept quantized, the module is unpacked when first read: the same error then, named the same way
    write_dir(dir, c, qc, bad);
    LoadOptions keep;
    keep.keep_quantized = true;
    const Checkpoint deferred = load_checkpoint(dir.path.string(), keep);
    const QuantizedEntry& o = deferred.quantized.at("model.layers.1.self_attn.o_proj.weight");
    CHECK(o.is_deferred());
    CHECK_THROWS_WITH_AS((void)o.weight(), doctest::Contains("model.layers.1.self_attn.o_proj"), InputError);
    // a tensor-parallel rank's rows alone: cut where the tensors allow (here they do not), then
    // unpacked and checked the same way
    CHECK_THROWS_WITH_AS((void)o.rows({{0, 32}}), doctest::Contains("model.layers.1.self_attn.o_proj"), InputError);
    CHECK_THROWS_WITH_AS((void)o.columns({{0, 32}}), doctest::Contains("model.layers.1.self_attn.o_proj"), InputError);
    auto cpu = make_cpu_backend(1);
    CHECK_THROWS_WITH_AS(make_model(deferred, *cpu), doctest::Contains("model.layers.1.self_attn.o_proj"), InputError);
  }
  {  // shapes right, scales not finite: the rows' cut goes through, its unpacking refuses them
    auto nan = w.tensors;
    Tensor& sc = nan.at("model.layers.0.self_attn.q_proj.scales");
    Tensor copy = Tensor::empty_host(sc.dtype, sc.shape);
    for (int64_t i = 0; i < copy.numel(); ++i) copy.ptr<uint16_t>()[i] = 0x7e00;  // f16 NaN
    sc = copy;
    write_dir(dir, c, qc, nan);
    LoadOptions keep;
    keep.keep_quantized = true;
    const Checkpoint deferred = load_checkpoint(dir.path.string(), keep);
    CHECK_THROWS_WITH_AS((void)deferred.quantized.at("model.layers.0.self_attn.q_proj.weight").rows({{8, 16}}),
                         doctest::Contains("model.layers.0.self_attn.q_proj"), InputError);
    CHECK_THROWS_WITH_AS((void)deferred.quantized.at("model.layers.0.self_attn.q_proj.weight").columns({{32, 32}}),
                         doctest::Contains("model.layers.0.self_attn.q_proj"), InputError);
  }
  {  // GPTQ symmetric whose stored zero points are not 2^(bits-1) - 1 (as a gptq_v2 file stores them)
    auto v2 = w.tensors;
    Tensor& qz = v2.at("model.layers.1.mlp.up_proj.qzeros");
    Tensor copy = Tensor::empty_host(qz.dtype, qz.shape);
    for (int64_t i = 0; i < copy.numel(); ++i) copy.ptr<int32_t>()[i] = int32_t(0x88888888u);  // zero 9
    qz = copy;
    refused(v2, qc, "the config says symmetric, but the zero point of row 0, group 0 is 9, not 8");
    refused(v2, qc, "gptq_v2");
    refused(v2, qc, "model.layers.1.mlp.up_proj");
  }
  {  // compressed-tensors symmetric: a weight_zero_point tensor is read, accepted only when symmetric
    quant::QuantConfigInfo ct;
    ct.layout = quant::QuantLayout::CompressedTensors;
    ct.scheme = {4, 32, true};
    const json ctc = quant::make_quantization_config(ct);
    const Written cw = quantize_checkpoint(c, ct, "");
    const std::string zp = "model.layers.0.mlp.down_proj.weight_zero_point";  // [N, G] int8, signed domain
    auto with_zp = cw.tensors;
    Tensor z = Tensor::zeros_host(DType::I8, {64, 96 / 32});  // down_proj [64, 96]: 3 groups
    with_zp[zp] = z;  // all 0: the symmetric zero point, as older compressed-tensors wrote it
    write_dir(dir, c, ctc, with_zp);
    CHECK_NOTHROW(load_checkpoint(dir.path.string()));
    Tensor z3 = Tensor::zeros_host(DType::I8, z.shape);
    z3.ptr<int8_t>()[5] = 3;
    with_zp[zp] = z3;
    refused(with_zp, ctc, "the config says symmetric, but the zero point of row 1, group 2 is 11, not 8");
    {
      write_dir(dir, c, ctc, with_zp);  // kept quantized: refused when decoded, before any kernel runs
      LoadOptions keep;
      keep.keep_quantized = true;
      const Checkpoint deferred = load_checkpoint(dir.path.string(), keep);
      auto cpu = make_cpu_backend(1);
      CHECK_THROWS_WITH_AS(make_model(deferred, *cpu), doctest::Contains("model.layers.0.mlp.down_proj"), InputError);
    }
    // a scale of 1e38 (f32 scales): weights past f16's range, refused by name
    auto huge = cw.tensors;
    Tensor& sc = huge.at("model.layers.0.self_attn.k_proj.weight_scale");
    REQUIRE(sc.dtype == DType::F32);
    Tensor big = Tensor::empty_host(sc.dtype, sc.shape);
    std::memcpy(big.data, sc.data, sc.nbytes());
    big.ptr<float>()[1] = 1e38f;
    huge.at("model.layers.0.self_attn.k_proj.weight_scale") = big;
    refused(huge, ctc, "the scale of row 0, group 1 is 1e+38");
    refused(huge, ctc, "model.layers.0.self_attn.k_proj");
    // a kv scale named for layer -1, and a stray tensor of a quantized module: refused by name
    auto stray = cw.tensors;
    stray["model.layers.-1.self_attn.k_scale"] = Tensor::zeros_host(DType::F32, {1});
    refused(stray, ctc, "has no place for: model.layers.-1.self_attn.k_scale");
    stray = cw.tensors;
    stray["model.layers.0.mlp.up_proj.weight_global_scale"] = Tensor::zeros_host(DType::F32, {1});
    refused(stray, ctc, "model.layers.0.mlp.up_proj.weight_global_scale");
  }
  // another quant_method
  refused(w.tensors, json{{"quant_method", "bitsandbytes"}}, "'bitsandbytes' is not supported");
  // the right one loads
  write_dir(dir, c, qc, w.tensors);
  CHECK(load_checkpoint(dir.path.string()).config.source_quantization.has_value());
  // no quantization_config: not quantized
  write_dir(dir, c, json(), random_checkpoint(c, 1, 0.05f).tensors);
  CHECK_FALSE(load_checkpoint(dir.path.string()).config.source_quantization.has_value());
}

TEST_CASE("quantized checkpoint, keep_quantized: every layout stays quantized and gives the dense logits") {
  const ModelConfig c = tiny_llama_config(64, 2, 16);  // hidden 64, intermediate 96: group 32 divides both
  struct Case {
    quant::QuantLayout layout;
    quant::QuantScheme scheme;
  };
  const Case cases[] = {{quant::QuantLayout::CompressedTensors, {4, 32, true}},
                        {quant::QuantLayout::CompressedTensors, {8, -1, false}},
                        {quant::QuantLayout::CompressedTensors, {8, 32, true}},
                        {quant::QuantLayout::AutoAwqGemm, {4, 32, false}},
                        {quant::QuantLayout::Gptq, {4, 32, true}},
                        {quant::QuantLayout::Gptq, {8, 32, false}}};
  std::mt19937 rng(17);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 19; ++i) tokens.push_back(int32_t(rng() % 64));
  for (const Case& cs : cases) {
    quant::QuantConfigInfo info;
    info.layout = cs.layout;
    info.scheme = cs.scheme;
    info.ignore = {"lm_head", "model.layers.1.mlp.down_proj"};
    INFO(info.label());
    const Written w = quantize_checkpoint(c, info, "model.layers.1.mlp.down_proj");
    ScratchDir dir("qck_keep");
    write_dir(dir, c, quant::make_quantization_config(info), w.tensors);
    LoadOptions keep;
    keep.keep_quantized = true;
    const Checkpoint q = load_checkpoint(dir.path.string(), keep);
    CHECK(q.quantized.size() == 13);
    CHECK(q.notes.empty());
    for (const auto& [name, values] : w.expected) {
      INFO(name);
      REQUIRE(q.quantized.count(name) == 1);
      CHECK_FALSE(q.has(name));
      CHECK(q.quantized.at(name).is_deferred());  // no act-order: unpacked when first read (GPTQ's plain g_idx too)
      // a tensor-parallel rank's rows, cut from the packed tensors: those rows of the whole weight
      const std::vector<quant::IndexRange> ranges = {{16, 16}, {0, 8}};
      const std::vector<float> part = quant::dequantize(q.quantized.at(name).rows(ranges));
      // and a row-parallel rank's input columns, one range cutting a group: those columns of the whole
      const std::vector<quant::IndexRange> cols = {{32, 16}, {0, 8}, {56, 8}};
      const std::vector<float> cpart = quant::dequantize(q.quantized.at(name).columns(cols));
      CHECK(q.quantized.at(name).is_deferred());
      const quant::GroupAffineWeight& g = q.quantized.at(name).weight();
      CHECK(g.bits == cs.scheme.bits);
      CHECK(part == quant::dequantize(quant::select_rows(g, ranges)));
      CHECK(cpart == quant::dequantize(quant::select_columns(g, cols)));
      check_rounding_close(quant::dequantize(g), values);
    }
    for (const auto& [name, t] : q.tensors) {
      INFO(name);
      CHECK(name.find("qweight") == std::string::npos);
      CHECK(name.find("weight_packed") == std::string::npos);
    }
    CHECK(q.has("model.layers.1.mlp.down_proj.weight"));  // ignored: dense, as stored

    test::CanonicalRecordingBackend rec;
    auto qmodel = make_model(q, rec);
    CHECK(rec.uploaded.size() == 7);  // layer 0: qkv, o, gate_up, down; layer 1: qkv, o, gate_up
    for (const LinearWeight& lw : rec.uploaded)
      CHECK(lw.format == (cs.scheme.bits == 4 ? WeightFormat::Int4Group : WeightFormat::Int8Group));
    auto cpu = make_cpu_backend(1);
    auto dmodel = make_model(load_checkpoint(dir.path.string()), *cpu);
    const std::vector<float> want = test::prefill_logits(*dmodel, tokens);
    const double diff = test::relative_max_diff(test::prefill_logits(*qmodel, tokens), want);
    CHECK(diff < 1e-5);
  }
}

TEST_CASE("quantized checkpoint, keep_quantized: act-order g_idx weights stay quantized, input columns permuted") {
  const ModelConfig c = tiny_llama_config(64, 2, 16);
  const quant::QuantConfigInfo info = gptq_act_order_info();
  const Written w = quantize_checkpoint(c, info, "", GIdx::ActOrder);
  ScratchDir dir("qck_actorder");
  write_dir(dir, c, quant::make_quantization_config(info), w.tensors);
  LoadOptions keep;
  keep.keep_quantized = true;
  const Checkpoint q = load_checkpoint(dir.path.string(), keep);
  CHECK(q.notes.empty());
  REQUIRE(q.quantized.size() == 14);
  for (const auto& [name, values] : w.expected) {
    INFO(name);
    CHECK_FALSE(q.quantized.at(name).is_deferred());  // an act-order g_idx: unpacked at load to decide
    const quant::GroupAffineWeight& g = q.quantized.at(name).weight();
    REQUIRE(g.perm.size() == size_t(g.k));
    check_rounding_close(quant::dequantize(g), values);  // in input order again
  }

  // Loaded: every linear quantized with its permutation (q/k/v and gate/up fuse: one order each).
  test::CanonicalRecordingBackend rec;
  auto qmodel = make_model(q, rec);
  REQUIRE(rec.uploaded.size() == 8);
  for (const LinearWeight& lw : rec.uploaded) {
    CHECK(lw.format == WeightFormat::Int4Group);
    CHECK(lw.input_perm.numel() == lw.k);
  }
  // Tensor parallel: column splits keep the order; a row split (o, down) would give a rank input
  // columns that are not whole groups, so the loader takes it dense (named in its note).
  WeightSource down{"layers.0.down", WeightRole::Down, 0, {"model.layers.0.mlp.down_proj.weight"}};
  ShardSpec row{ShardKind::Row, 0, 2, 1, {{96, "intermediate rows"}}};
  std::string why;
  CHECK_FALSE(gather_quantized_shard(q, down, row, &why).has_value());
  CHECK(why.find("act-order") != std::string::npos);
  WeightSource gate{"layers.0.gate_up", WeightRole::GateUp, 0,
                    {"model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight"}};
  ShardSpec col{ShardKind::Column, 1, 2, 1, {{96, "gate rows"}, {96, "up rows"}}};
  const std::optional<quant::GroupAffineWeight> half = gather_quantized_shard(q, gate, col, &why);
  REQUIRE(half.has_value());
  CHECK(half->n == 96);
  CHECK(half->perm == q.quantized.at("model.layers.0.mlp.gate_proj.weight").weight().perm);

  // The CPU kernels (gathering x's columns) against the dense checkpoint: f32 activations within
  // rounding; int8 activations (quantized after the gather) within their own error.
  const std::vector<int32_t> tokens = {1, 5, 9, 17, 33, 2, 7};
  auto cpu_dense = make_cpu_backend(1, ActQuantMode::None);
  auto dense = make_model(load_checkpoint(dir.path.string()), *cpu_dense);
  const std::vector<float> want = test::prefill_logits(*dense, tokens);
  for (ActQuantMode mode : {ActQuantMode::None, ActQuantMode::Int8}) {
    auto cpu = make_cpu_backend(1, mode);
    auto kept = make_model(q, *cpu);
    const double diff = test::relative_max_diff(test::prefill_logits(*kept, tokens), want);
    INFO("int8 activations: " << (mode == ActQuantMode::Int8) << ", diff " << diff);
    CHECK(diff < (mode == ActQuantMode::None ? 1e-5 : 2e-2));
  }
}

TEST_CASE("quantized checkpoint, keep_quantized: act-order orders that cannot run quantized load dense, with a note") {
  const ModelConfig c = tiny_llama_config(64, 2, 16);
  const quant::QuantConfigInfo info = gptq_act_order_info();
  LoadOptions keep;
  keep.keep_quantized = true;
  {  // groups of unequal sizes: no group-affine form; dense exactly as without keep_quantized
    const Written w = quantize_checkpoint(c, info, "", GIdx::Uneven);
    ScratchDir dir("qck_actorder_uneven");
    write_dir(dir, c, quant::make_quantization_config(info), w.tensors);
    const Checkpoint q = load_checkpoint(dir.path.string(), keep);
    CHECK(q.quantized.empty());
    for (const auto& [name, values] : w.expected) {
      INFO(name);
      const Tensor& t = q.get(name);
      REQUIRE(t.dtype == DType::F32);
      CHECK(std::memcmp(t.data, values.data(), values.size() * 4) == 0);
    }
    REQUIRE(q.notes.size() == 1);
    CHECK(q.notes[0].find("14 of 14") != std::string::npos);
    CHECK(q.notes[0].find("act-order") != std::string::npos);
  }
  {  // a different order per module: q/k/v and gate/up cannot fuse into one gather, so they load
     // dense; o and down stay quantized
    const Written w = quantize_checkpoint(c, info, "", GIdx::PerModule);
    ScratchDir dir("qck_actorder_permodule");
    write_dir(dir, c, quant::make_quantization_config(info), w.tensors);
    const Checkpoint q = load_checkpoint(dir.path.string(), keep);
    CHECK(q.quantized.size() == 14);
    test::CanonicalRecordingBackend rec;
    auto qmodel = make_model(q, rec);
    CHECK(rec.uploaded.size() == 4);  // o and down of both layers
    const std::vector<int32_t> tokens = {1, 5, 9, 17, 33, 2, 7};
    auto cpu = make_cpu_backend(1, ActQuantMode::None), cpu_dense = make_cpu_backend(1, ActQuantMode::None);
    auto kept = make_model(q, *cpu);
    auto dense = make_model(load_checkpoint(dir.path.string()), *cpu_dense);
    CHECK(test::relative_max_diff(test::prefill_logits(*kept, tokens), test::prefill_logits(*dense, tokens)) < 1e-5);
  }
}
