#include "quant/algo/quantize_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <regex>
#include <set>
#include <sstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "engine/backend/backend.h"
#include "engine/convert/convert.h"
#include "engine/core/error.h"
#include "engine/core/partial_output.h"
#include "engine/core/thread_pool.h"
#include "engine/model/checkpoint.h"
#include "engine/model/describe_weights.h"
#include "engine/model/gguf.h"
#include "engine/model/llama/llama.h"
#include "engine/model/registry.h"
#include "engine/model/safetensors.h"
#include "engine/tokenizer/tokenizer.h"
#include "quant/algo/awq.h"
#include "quant/algo/dense_layer.h"
#include "quant/algo/family_calibration.h"
#include "quant/algo/gptq.h"
#include "quant/algo/hessian.h"
#include "quant/algo/rtn.h"

namespace fs = std::filesystem;

namespace llmctl::quant {

namespace {

constexpr float kFp8E4m3Max = 448.0f;

DType dtype_of_packed(const std::string& name) {
  static const std::pair<const char*, DType> table[] = {{"F32", DType::F32}, {"F16", DType::F16}, {"BF16", DType::BF16},
                                                        {"I32", DType::I32}, {"I64", DType::I64}, {"I8", DType::I8},
                                                        {"U8", DType::U8}};
  for (const auto& [n, t] : table)
    if (name == n) return t;
  LLM_THROW() << "packed tensor of unknown dtype " << name;
}

Tensor to_tensor(const PackedTensor& p) {
  Tensor t = Tensor::empty_host(dtype_of_packed(p.dtype), p.shape);
  LLM_CHECK(t.nbytes() == p.bytes.size()) << "packed tensor: " << p.bytes.size() << " bytes for shape " << t.shape_str();
  std::memcpy(t.data, p.bytes.data(), p.bytes.size());
  return t;
}

// One linear of a layer: its module name, weight and the calibrated linear whose input it reads
// (the rows of one site are consecutive entries, in the order the family fuses them).
struct LinearRef {
  std::string module;  // "model.layers.3.self_attn.q_proj"
  Tensor* weight;
  LinearSite site;
};

// The checkpoint's module of each: a fused layer's q, k and v share qkv_proj, its gate and up
// gate_up_proj (consecutive entries of one module are written as one tensor, rows in this order).
// A mixture-of-experts layer's MLP is its experts' gate, up and down, each its own module.
std::vector<LinearRef> linears_of(DenseLayer& L, int layer) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  const std::string qkv = p + "self_attn.qkv_proj", gate_up = p + "mlp.gate_up_proj";
  std::vector<LinearRef> out = {{L.fused ? qkv : p + "self_attn.q_proj", &L.q, {LinearGroup::Qkv}},
                                {L.fused ? qkv : p + "self_attn.k_proj", &L.k, {LinearGroup::Qkv}},
                                {L.fused ? qkv : p + "self_attn.v_proj", &L.v, {LinearGroup::Qkv}},
                                {p + "self_attn.o_proj", &L.o, {LinearGroup::O}}};
  if (L.experts.empty()) {
    out.push_back({L.fused ? gate_up : p + "mlp.gate_proj", &L.gate, {LinearGroup::GateUp}});
    out.push_back({L.fused ? gate_up : p + "mlp.up_proj", &L.up, {LinearGroup::GateUp}});
    out.push_back({p + "mlp.down_proj", &L.down, {LinearGroup::Down}});
  }
  for (ExpertMlp& m : L.experts) {
    out.push_back({m.gate_module, &m.gate, {LinearGroup::GateUp, m.expert}});
    out.push_back({m.up_module, &m.up, {LinearGroup::GateUp, m.expert}});
    out.push_back({m.down_module, &m.down, {LinearGroup::Down, m.expert}});
  }
  return out;
}

// The rows of several quantized linears of one input, stacked as one (a fused module). Their
// schemes and group order (act-order's g_idx, from the same Hessian) are the same.
QuantizedLinear stack_quantized(const std::vector<const QuantizedLinear*>& parts) {
  QuantizedLinear out = *parts[0];
  for (size_t i = 1; i < parts.size(); ++i) {
    const QuantizedLinear& p = *parts[i];
    LLM_CHECK(p.k == out.k && p.g_idx == out.g_idx && p.scheme.bits == out.scheme.bits &&
              p.scheme.group_size == out.scheme.group_size && p.scheme.symmetric == out.scheme.symmetric)
        << "fused module parts quantized differently";
    out.n += p.n;
    out.q.insert(out.q.end(), p.q.begin(), p.q.end());
    out.scales.insert(out.scales.end(), p.scales.begin(), p.scales.end());
    out.zeros.insert(out.zeros.end(), p.zeros.begin(), p.zeros.end());
  }
  return out;
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  LLM_REQUIRE(out) << "cannot write " << path.string();
  out << text;
  LLM_REQUIRE(out.good()) << "error writing " << path.string();
}

std::string gib(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", bytes / double(1 << 30));
  return b;
}

std::string fmt(double v, int prec = 3) {
  std::ostringstream s;
  s.precision(prec);
  s << v;
  return s.str();
}

// Checks the options against the checkpoint before any work: method, layout, bits, and the group
// size against every linear's input width.
void check_options(const QuantizeOptions& o, QuantLayout layout, const ModelConfig& c) {
  LLM_REQUIRE(o.method == "rtn" || o.method == "gptq" || o.method == "awq")
      << "unknown --method '" << o.method << "' (rtn, gptq or awq)";
  LLM_REQUIRE(o.kv_cache.empty() || o.kv_cache == "fp8" || o.kv_cache == "int8")
      << "unknown --kv-cache '" << o.kv_cache << "' (int8 or fp8)";
  LLM_REQUIRE(!o.act_order || o.method == "gptq") << "--act-order applies to --method gptq only";
  LLM_REQUIRE(layout != QuantLayout::AutoAwqGemm || o.scheme.bits == 4)
      << "the AutoAWQ GEMM layout holds 4-bit weights only (use --format compressed-tensors for --bits 8)";
  LLM_REQUIRE(layout != QuantLayout::Gptq || o.scheme.symmetric)
      << "the GPTQ (v1) layout stores zero points minus one and cannot hold the zero point 0 that asymmetric groups "
         "produce: use --format compressed-tensors (or awq) for --asym";
  LLM_REQUIRE(o.dampening > 0 && o.dampening < 1) << "--dampening must be in (0, 1)";
  LLM_REQUIRE(c.num_experts == 0 || o.method != "awq")
      << "--method awq does not handle mixture-of-experts models (" << c.architecture
      << "): its scales would fold into the router and every expert; use --method gptq or rtn";
  const int64_t attn = int64_t(c.num_heads) * c.head_dim;
  std::vector<std::pair<std::string, int64_t>> widths = {{"q/k/v/gate/up (hidden size)", c.hidden_size},
                                                         {"o_proj (heads x head dim)", attn}};
  bool dense_mlp = false;  // some layer has a dense MLP (every layer of a dense model)
  for (int l = 0; l < c.num_layers; ++l) dense_mlp |= !c.layer_is_moe(l);
  if (dense_mlp) widths.emplace_back("down_proj (intermediate size)", c.intermediate_size);
  if (c.num_experts > 0) widths.emplace_back("an expert's down_proj (moe_intermediate_size)", c.moe_intermediate_size);
  if (c.shared_expert_intermediate_size > 0)
    widths.emplace_back("the shared expert's down_proj (shared_expert_intermediate_size)",
                        c.shared_expert_intermediate_size);
  std::string all;
  int64_t common = 0;  // the widths' greatest common divisor
  for (const auto& [what, k] : widths) {
    all += (all.empty() ? "" : ", ") + std::to_string(k);
    common = std::gcd(common, k);
  }
  int64_t fits = 1;  // the largest power of two (at most 128) that divides them all
  while (fits < 128 && common % (2 * fits) == 0) fits *= 2;
  for (const auto& [what, k] : widths) {
    try {
      o.scheme.check(k);
    } catch (const std::invalid_argument& e) {
      LLM_THROW() << e.what() << ": " << what << " = " << k << "; pick a --group-size that divides " << all
                  << " (e.g. " << fits << "), or -1";
    }
  }
}

// The block types ("Q4_1", "Q4_K, Q6_K") of a GGUF's quantized 2-D layer weights; "" when all are floats.
std::string quantized_gguf_linear_types(const GgufFile& g) {
  std::string out;
  for (const auto& [type, n] : gguf_layer_weight_types(g))
    if (type != "F32" && type != "F16" && type != "BF16") out += (out.empty() ? "" : ", ") + type;
  return out;
}

}  // namespace

static QuantizeReport quantize_model_in(const QuantizeOptions& o, QuantLayout layout,
                                const std::function<void(const std::string&)>& log) {
  const auto t0 = std::chrono::steady_clock::now();
  LLM_REQUIRE(!o.output.empty() && !o.input.empty()) << "quantize needs IN and OUT";
  LLM_REQUIRE(fs::weakly_canonical(o.input) != fs::weakly_canonical(o.output)) << "input and output are the same path";
  PartialOutput partial(o.output, "quantize");  // OUT.part, renamed to OUT at the end; removed on an error
  const fs::path& part = partial.path();
  ThreadPool::set_global_threads(o.threads);

  LoadOptions lo;
  lo.keep_quantized = false;  // quantize reads dense weights: a GGUF's blocks dequantized to f32
  Checkpoint ck = load_checkpoint(o.input, lo);  // stored dtypes, views of the mapped files
  const ModelConfig& c = ck.config;
  LLM_REQUIRE(!c.source_quantization.has_value())
      << o.input << " is already quantized (" << c.source_quantization->label()
      << "): quantize a dense checkpoint (f32/f16/bf16, or a GGUF llmctl can dequantize)";
  if (ck.gguf && !o.allow_requantize)
    if (const std::string types = quantized_gguf_linear_types(*ck.gguf); !types.empty())
      LLM_THROW() << o.input << " is already quantized (" << types << " GGUF): quantizing it again rounds its "
                  << "rounded weights a second time; start from a dense checkpoint (an HF directory, or an F32/F16/BF16 "
                  << "GGUF), or pass --allow-requantize to do it anyway";
  find_architecture(c.architecture);  // refuses an architecture llmctl does not run, by name
  check_llama_supported(c);
  check_options(o, layout, c);
  if (layout == QuantLayout::Gptq && o.act_order)
    log("warning: act-order (desc_act) GPTQ checkpoints are not run by every vLLM GPTQ kernel; llmctl loads them");
  std::unique_ptr<Tokenizer> tok = load_tokenizer(ck);
  // What config.json will say; its ignore list decides which linears stay dense.
  QuantConfigInfo info;
  info.layout = layout;
  info.scheme = o.scheme;
  info.act_order = o.act_order;
  info.ignore = o.ignore;
  info.ignores("lm_head");  // a bad "re:" pattern is refused here, before any work
  // A mixture of experts' routers and shared-expert gates stay dense (as llm-compressor leaves
  // them): listed in the ignore list, so that vLLM and transformers expect them dense too.
  // The family's name map, made once (a mixture of experts' layers read their experts from it).
  const Architecture& arch = find_architecture(c.architecture);
  const std::vector<WeightSource> sources = arch.weight_sources ? arch.weight_sources(c) : std::vector<WeightSource>{};
  std::set<std::string> kept_dense;
  for (const WeightSource& s : sources)
    if (s.role == WeightRole::Router || s.role == WeightRole::SharedGate)
      for (const std::string& part : s.parts)
        if (const std::string m = module_of(part); kept_dense.insert(m).second && !info.ignores(m)) info.ignore.push_back(m);

  const bool calibrate = o.method != "rtn" || o.kv_cache == "fp8";
  std::vector<std::vector<int32_t>> samples;
  if (calibrate) {
    samples = draw_calibration_samples(o.calib, *tok);
    // The batch's activations stay in memory whole, in f32: the family forward's step buffers
    // (hidden, residual, normed, q/k/v, attention, gate/up, act) and cached keys and values; for AWQ
    // also its search batch's four linear inputs, kept through the layer's search. Refused up front
    // rather than failing mid-way.
    const double tokens = double(o.calib.samples) * o.calib.seq_len;
    const double H = c.hidden_size, A = double(c.num_heads) * c.head_dim, Akv = double(c.num_kv_heads) * c.head_dim,
                 E = c.num_experts, k = c.experts_per_token, Ie = c.moe_intermediate_size;
    const double I = std::max({c.intermediate_size, c.moe_intermediate_size, c.shared_expert_intermediate_size});
    // family forward per token: hidden, residual, normed (3H); q/k/v (A + 2Akv); attention (A);
    // gate/up (2I); act (I); the cached keys and values (2Akv); a mixture of experts' router logits
    // (E) and its k routed rows in and out (2H), through gate/up (2Ie) and act (Ie)
    const double family_width = 3 * H + (A + 2 * Akv) + A + 2 * I + I + 2 * Akv + (E > 0 ? E + k * (2 * H + 3 * Ie) : 0);
    const double awq_width = o.method == "awq" ? 2 * (H + A + H + I) : 0;  // the inputs and their scaled copies
    const double need = tokens * sizeof(float) * (family_width + awq_width);
    const double have = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
    LLM_REQUIRE(have <= 0 || need <= have)
        << "--calib-samples " << o.calib.samples << " x --calib-seq-len " << o.calib.seq_len << " needs about "
        << gib(need) << " GiB for the calibration activations of this model; this machine has " << gib(have)
        << " GiB: take fewer samples or shorter ones";
    log("calibration: " + std::to_string(samples.size()) + " samples x " + std::to_string(o.calib.seq_len) +
        " tokens (seed " + std::to_string(o.calib.seed) + ")");
    if (!o.calib_dump.empty()) {
      std::ostringstream s;
      for (const auto& smp : samples) s << nlohmann::json(smp).dump() << "\n";
      write_text(o.calib_dump, s.str());
    }
  }

  const DType dense_dtype = ck.get("model.embed_tokens.weight").dtype;
  const std::string scale_dtype = layout == QuantLayout::CompressedTensors ? safetensors_dtype_name(dense_dtype) : "F16";
  std::vector<std::pair<std::string, Tensor>> out;
  auto keep_dense = [&](const std::string& name, const Tensor& t) {
    out.emplace_back(name, t.dtype == dense_dtype ? t : convert_host(t, dense_dtype));
  };
  for (const char* name : {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"})
    if (ck.has(name) && !(std::string(name) == "lm_head.weight" && c.tie_word_embeddings)) keep_dense(name, ck.get(name));

  // The calibration batch through the family's own forward (gptq, fp8 KV scales, and awq when it
  // searches on every sample); awq's scale search on its first samples where it takes fewer.
  std::unique_ptr<FamilyCalibration> family, search;
  if (calibrate) {
    const int ns = o.awq_search_samples;
    const bool subset = o.method == "awq" && ns > 0 && ns < int(samples.size());
    if (subset)
      search = std::make_unique<FamilyCalibration>(
          ck, std::vector<std::vector<int32_t>>(samples.begin(), samples.begin() + ns), o.threads);
    if (!subset || o.kv_cache == "fp8") family = std::make_unique<FamilyCalibration>(ck, samples, o.threads);
  }
  const FamilyCalibration::BeforeLinear as_loaded = [](LinearSite, const Tensor&, const Tensor&) { return Tensor{}; };
  QuantizeReport rep;
  const std::vector<WeightSpec> specs = model_tensor_specs(c);
  for (int i = 0; i < c.num_layers; ++i) {
    LLM_REQUIRE(!o.stop || !o.stop->load()) << "quantize interrupted before layer " << i << "; nothing was written";
    const auto tl = std::chrono::steady_clock::now();
    DenseLayer L = DenseLayer::from_checkpoint(ck, i, arch.weight_sources ? &sources : nullptr);
    std::vector<LinearRef> lin = linears_of(L, i);
    std::string detail;
    std::vector<QuantizedLinear> q(lin.size());
    auto rtn = [&](size_t j) {
      const Tensor& w = *lin[j].weight;
      q[j] = rtn_quantize(w.ptr<float>(), w.dim(0), w.dim(1), o.scheme);
    };
    KvAbsMax amax;
    if (o.method == "gptq") {
      // True-sequential through the family's forward: each linear's Hessian from its input as the
      // layer runs, its rows quantized (the parts of a fused linear share the Hessian: rows are
      // independent), and the linear run with the quantized values, so the next one's input and the
      // next layer's come from them.
      double loss = 0;
      // A routed expert's Hessian comes from the rows of the calibration tokens routed to it.
      auto gptq_group = [&](LinearSite site, const Tensor& input, const Tensor& w) -> Tensor {
        std::vector<size_t> members;
        for (size_t j = 0; j < lin.size(); ++j)
          if (lin[j].site == site) members.push_back(j);
        HessianAccumulator acc(input.dim(1));
        acc.add(input.ptr<float>(), input.dim(0), int64_t(samples.size()));  // one sample per sequence, as llm-compressor counts
        Tensor run;  // w with the quantized rows in place of the originals
        const int64_t K = w.dim(1);
        int64_t r0 = 0;
        for (size_t j : members) {
          const int64_t n = lin[j].weight->dim(0);
          LLM_CHECK(lin[j].weight->dim(1) == K && r0 + n <= w.dim(0))
              << lin[j].module << ": rows " << r0 << "+" << n << " of the layer's " << w.shape_str() << " weight";
          if (!info.ignores(lin[j].module)) {
            GptqOptions go;
            go.scheme = o.scheme;
            go.dampening = o.dampening;
            go.act_order = o.act_order;
            go.threads = o.threads;
            GptqResult r = gptq_quantize(w.ptr<float>() + r0 * K, n, K, acc.h(), go);
            if (r.dampening_used > o.dampening)
              log(lin[j].module + ": Hessian not positive definite; dampening raised to " + fmt(r.dampening_used));
            loss += r.loss;
            q[j] = std::move(r.weight);
            if (run.empty()) {
              run = Tensor::empty_host(DType::F32, w.shape);
              std::memcpy(run.data, w.data, w.nbytes());
            }
            const std::vector<float> d = dequantize(q[j]);
            std::memcpy(run.ptr<float>() + r0 * K, d.data(), d.size() * sizeof(float));
          }
          r0 += n;
        }
        LLM_CHECK(r0 == w.dim(0)) << "the layer's " << w.shape_str() << " weight is not its parts' " << r0 << " rows";
        return run;
      };
      family->run_layer(i, gptq_group, o.kv_cache == "fp8" ? &amax : nullptr);
      detail = "gptq loss " + fmt(loss);
      // An expert no calibration token reached has no Hessian: rounded to nearest instead.
      std::set<int> unreached;
      for (size_t j = 0; j < lin.size(); ++j)
        if (lin[j].site.expert >= 0 && q[j].n == 0 && !info.ignores(lin[j].module)) {
          rtn(j);
          unreached.insert(lin[j].site.expert);
        }
      if (!L.experts.empty()) {
        const int routed = int(std::count_if(L.experts.begin(), L.experts.end(),
                                             [](const ExpertMlp& m) { return m.expert >= 0; }));
        detail += ", experts " + std::to_string(routed - int(unreached.size())) + "/" + std::to_string(routed) +
                  " calibrated";
        if (!unreached.empty()) detail += ", " + std::to_string(unreached.size()) + " by rtn (no calibration token)";
        rep.experts_calibrated += routed - int(unreached.size());
        rep.experts_rtn_fallback += int(unreached.size());
      }
    } else {
      // AWQ: scales (searched on the search samples) and clipping fold into L; the next layer's input
      // comes from the layer as loaded, whose function the scaled, unclipped one is (as AutoAWQ and
      // llm-compressor propagate).
      AwqOptions ao{o.scheme};
      if (!o.awq_clip) ao.max_shrink = 0;
      KvAbsMax* kv_amax = o.kv_cache == "fp8" ? &amax : nullptr;
      if (o.method == "awq") {
        FamilyCalibration& sf = search ? *search : *family;
        sf.begin_layer(i);
        AwqInputs in = awq_inputs(sf);
        AwqLayerReport r = awq_scale_layer(sf, L, in, ao);
        awq_clip_layer(L, in, ao);
        detail = "awq ratios attn " + fmt(r.ratio_attn, 2) + " mlp " + fmt(r.ratio_mlp, 2) + " down " +
                 fmt(r.ratio_down, 2) + (r.ratio_o >= 0 ? " o " + fmt(r.ratio_o, 2) : "") + ", mlp loss " +
                 fmt(r.loss_before) + " -> " + fmt(r.loss_after);
        sf.advance(as_loaded, search ? nullptr : kv_amax);
        if (search && family) family->run_layer(i, as_loaded, kv_amax);  // the fp8 KV scales, on every sample
      } else if (family) {  // rtn with fp8 KV scales: the layer run as it is, for its keys and values
        family->run_layer(i, as_loaded, kv_amax);
      }
      for (size_t j = 0; j < lin.size(); ++j)
        if (!info.ignores(lin[j].module)) rtn(j);
      if (detail.empty()) detail = "rtn";
    }

    const std::string p = "model.layers." + std::to_string(i) + ".";
    keep_dense(p + "input_layernorm.weight", L.input_norm);
    keep_dense(p + L.mlp_norm_name + ".weight", L.mlp_norm);
    // The layer's other norms as stored (Qwen3's and Gemma's per-head norms, Gemma's sandwich norms),
    // and a mixture of experts' router and shared-expert gate.
    for (const WeightSpec& s : specs)
      if (s.name.starts_with(p) && s.name != p + "input_layernorm.weight" && s.name != p + L.mlp_norm_name + ".weight" &&
          (s.norm || kept_dense.count(module_of(s.name))))
        keep_dense(s.name, ck.get(s.name));
    if (!L.q_bias.empty())  // as the layer holds them: AWQ's v -> o scaling divides v's bias too
      for (const auto& [b, t] : {std::pair<const char*, const Tensor*>{"q", &L.q_bias}, {"k", &L.k_bias}, {"v", &L.v_bias}})
        keep_dense(p + "self_attn." + b + "_proj.bias", *t);
    for (size_t j = 0; j < lin.size();) {  // a module's consecutive parts written as one
      size_t end = j + 1;
      while (end < lin.size() && lin[end].module == lin[j].module) ++end;
      if (info.ignores(lin[j].module)) {
        std::vector<const Tensor*> parts;
        for (size_t m = j; m < end; ++m) parts.push_back(lin[m].weight);
        keep_dense(lin[j].module + ".weight", parts.size() == 1 ? *parts[0] : stack_rows(parts));
        ++rep.linears_dense;
      } else {
        std::vector<const QuantizedLinear*> parts;
        for (size_t m = j; m < end; ++m) parts.push_back(&q[m]);
        for (auto& [suffix, t] : pack_linear_weight(layout, parts.size() == 1 ? q[j] : stack_quantized(parts), scale_dtype))
          out.emplace_back(lin[j].module + "." + suffix, to_tensor(t));
        ++rep.linears_quantized;
      }
      j = end;
    }
    if (o.kv_cache == "fp8") {
      for (const auto& [name, m] : {std::pair<const char*, const std::vector<float>*>{"k_scale", &amax.k}, {"v_scale", &amax.v}}) {
        Tensor s = Tensor::empty_host(DType::F32, {int64_t(m->size())});
        for (size_t h = 0; h < m->size(); ++h) s.ptr<float>()[h] = std::max((*m)[h], 1e-6f) / kFp8E4m3Max;
        out.emplace_back(p + "self_attn." + name, s);
      }
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - tl).count();
    log("[" + std::to_string(i + 1) + "/" + std::to_string(c.num_layers) + "] layer " + std::to_string(i) + ": " +
        detail + " (" + fmt(secs, 3) + " s)");
    ++rep.layers;
  }

  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  // Every tensor the model reads is written, dense or as its packed module: a family part this
  // writer does not know is an error here, not a checkpoint that fails to load later.
  std::set<std::string> written;
  for (const auto& [name, t] : out) written.insert(name);
  for (const WeightSpec& s : specs) {
    const std::string module = module_of(s.name);
    LLM_CHECK(written.count(s.name) || (s.name == "lm_head.weight" && c.tie_word_embeddings) ||
              written.count(module + "." + quantized_marker_suffix(layout)))
        << "quantize wrote no tensor for '" << s.name << "' of " << c.architecture;
  }
  const ShardedWrite w = write_sharded_safetensors(part.string(), out, 2000000000);
  if (o.kv_cache == "fp8")
    info.kv_cache_scheme = {{"num_bits", 8}, {"type", "float"}, {"strategy", "attn_head"}, {"dynamic", false},
                            {"symmetric", true}};
  else if (o.kv_cache == "int8")
    info.kv_cache_scheme = {{"num_bits", 8}, {"type", "int"}, {"strategy", "token"}, {"dynamic", true},
                            {"symmetric", false}};
  nlohmann::json cfg = c.to_hf_json();
  cfg["quantization_config"] = make_quantization_config(info);
  write_text(part / "config.json", cfg.dump(2) + "\n");
  write_tokenizer_files(ck, *tok, part.string());
  partial.commit();

  rep.bytes_written = w.total_bytes;
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

QuantizeReport quantize_model(const QuantizeOptions& o, const std::function<void(const std::string&)>& log) {
  // quant/format and the algorithms report bad input as std::invalid_argument (they sit below
  // the engine's error types); here it becomes the InputError the CLI reports.
  try {
    return quantize_model_in(o, parse_quant_layout(o.format), log);
  } catch (const std::invalid_argument& e) {
    LLM_THROW() << e.what();
  }
}

}  // namespace llmctl::quant
