// Quantized HF checkpoints (engine/model/quantized_checkpoint, quant/format): the input is
// config.json (up to the first NUL; its quantization_config picks compressed-tensors, AutoAWQ or
// GPTQ) followed by model.safetensors. Both are written into a scratch directory that
// load_checkpoint reads as a model directory: the config is validated, every packed linear is
// unpacked and dequantized, and the fp8 KV scales (k_scale / v_scale) are read. Every loaded
// tensor is then read in full. Then again with the linears kept quantized (group-affine form):
// each one's last rows and some of its input columns unpacked alone (tensor-parallel ranks' cuts),
// then the whole dequantized. A checkpoint that loads must keep the consistency rules (every tensor
// placed, every dense weight finite, kept weights' scales bounded and zero points symmetric where
// the config says so): corpus/quantized_checkpoint/bad_* are files that once broke them.
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>

#include "engine/model/checkpoint.h"
#include "engine/model/kv_scales.h"
#include "engine/model/registry.h"
#include "tests/fuzz/fuzz_util.h"

using namespace llmctl;
using namespace llmctl::fuzz;
namespace fs = std::filesystem;

namespace {

const fs::path& scratch_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("llmctl-fuzz-qck-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

void write_file(const fs::path& p, std::string_view bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// The consistency rules between a config and its tensors, asked of every checkpoint that loads:
// each tensor is one the model places (model_tensor_specs, a layer's kv scale, a tied head, or
// rotary inverse frequencies, which are recomputed), and every dense weight is finite (checked here
// on f32 copies, independently of the loader's bit test). The kept-quantized pass below validates
// scales, offsets and symmetric zero points.
void check_consistency_rules(const Checkpoint& ck) {
  std::set<std::string> placed;
  for (const WeightSpec& s : model_tensor_specs(ck.config)) placed.insert(s.name);
  static const std::regex kv_scale(R"(model\.layers\.(\d+)\.self_attn\.[kv]_scale)");
  for (const auto& [name, t] : ck.tensors) {
    std::smatch m;
    const bool kv = std::regex_match(name, m, kv_scale) && std::stoll(m[1].str()) < ck.config.num_layers;
    if (!placed.count(name) && !kv && name != "lm_head.weight" && !name.ends_with(".rotary_emb.inv_freq"))
      __builtin_trap();
    if (t.dtype != DType::F32 && t.dtype != DType::F16 && t.dtype != DType::BF16) continue;
    const Tensor f = t.dtype == DType::F32 ? t : convert_host(t, DType::F32);
    for (int64_t i = 0; i < f.numel(); ++i)
      if (!std::isfinite(f.ptr<float>()[i])) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in(data, size);
  const fs::path& dir = scratch_dir();
  write_file(dir / "config.json", in.until_nul());
  write_file(dir / "model.safetensors", in.rest());
  expect_errors([&] {
    const Checkpoint ck = load_checkpoint(dir.string());
    check_consistency_rules(ck);
    volatile uint64_t sink = 0;
    for (const auto& [name, t] : ck.tensors) {
      const auto* p = static_cast<const uint8_t*>(t.data);
      const size_t n = t.nbytes();
      if (n && !p) __builtin_trap();
      uint64_t s = 0;
      for (size_t i = 0; i < n; ++i) s = s * 31 + p[i];
      sink = sink + s;
    }
    for (const KvScales& l : load_kv_scales(ck))
      if (l.k.size() != size_t(ck.config.num_kv_heads) || l.v.size() != l.k.size()) __builtin_trap();
  });
  expect_errors([&] {  // the linears kept quantized (group-affine) instead
    LoadOptions keep;
    keep.keep_quantized = true;
    const Checkpoint ck = load_checkpoint(dir.string(), keep);
    for (const auto& [name, e] : ck.quantized)  // each unpacked (deferred until read), errors by entry
      expect_errors([&] {
        if (e.n() > 0) {  // a tensor-parallel rank's last rows first: cut from the packed tensors
          const int64_t begin = e.n() / 2 / 8 * 8;
          const quant::GroupAffineWeight part = e.rows({{begin, e.n() - begin}});
          if (part.n != e.n() - begin || part.k != e.k()) __builtin_trap();
          try {
            part.validate();
          } catch (...) {
            __builtin_trap();
          }
        }
        if (e.k() > 1) {  // a row-parallel rank's input columns, cutting a group: the covering groups cut alone
          const int64_t begin = e.k() / 2 + 1;
          std::optional<quant::GroupAffineWeight> part;
          try {
            part = e.columns({{begin, e.k() - begin}, {0, 1}});
          } catch (const std::invalid_argument&) {  // act-order: no split by input columns (documented)
          }
          if (part && (part->n != e.n() || part->k != e.k() - begin + 1)) __builtin_trap();
          try {
            if (part) part->validate();
          } catch (...) {
            __builtin_trap();
          }
        }
        const quant::GroupAffineWeight& w = e.weight();
        if (w.n != e.n() || w.k != e.k() || w.codes.size() != size_t(w.n * w.k) ||
            w.scale.size() != size_t(w.n * w.groups()))
          __builtin_trap();
        try {  // a kept weight is consistent, its act-order permutation (if any) included
          w.validate();
        } catch (...) {
          __builtin_trap();
        }
        volatile float sink = 0;
        for (float v : quant::dequantize(w)) sink = sink + v;
      });
  });
  return 0;
}
