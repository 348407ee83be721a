// Quantized HF checkpoints (engine/model/quantized_checkpoint, quant/format): the input is
// config.json (up to the first NUL; its quantization_config picks compressed-tensors, AutoAWQ or
// GPTQ) followed by model.safetensors. Both are written into a scratch directory that
// load_checkpoint reads as a model directory: the config is validated, every packed linear is
// unpacked and dequantized, and the fp8 KV scales (k_scale / v_scale) are read. Every loaded
// tensor is then read in full. Then again with the linears kept quantized (group-affine form):
// each one's last rows and some of its input columns unpacked alone (tensor-parallel ranks' cuts),
// then the whole dequantized.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>

#include "engine/model/checkpoint.h"
#include "engine/model/kv_scales.h"
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in(data, size);
  const fs::path& dir = scratch_dir();
  write_file(dir / "config.json", in.until_nul());
  write_file(dir / "model.safetensors", in.rest());
  expect_errors([&] {
    const Checkpoint ck = load_checkpoint(dir.string());
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
