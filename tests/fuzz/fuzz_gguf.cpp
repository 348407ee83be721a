// GGUF reader: the input is a whole .gguf file (written to a memfd and opened by path, as the
// engine opens files). Opens it, reads every metadata value through each accessor, loads (and
// dequantizes) every tensor of modest size in both forms, and reads the llama config from it; for
// inputs up to 1 MiB, loads the whole llama checkpoint with its linears kept quantized (each entry's
// rows, then some of its input columns, decoded alone, as tensor-parallel ranks read them, then
// whole).
#include <cstdint>
#include <cstring>

#include "engine/model/gguf.h"
#include "engine/model/llama/gguf_llama.h"
#include "tests/fuzz/fuzz_util.h"

using namespace llmctl;
using namespace llmctl::fuzz;

namespace {

void touch(const GgufValue& v, int depth) {
  expect_errors([&] { (void)v.as_string(); });
  expect_errors([&] { (void)v.as_int(); });
  expect_errors([&] { (void)v.as_float(); });
  expect_errors([&] { (void)v.as_bool(); });
  if (v.is_array() && depth < 4) {
    size_t n = 0;
    for (const auto& e : v.as_array()) {
      if (++n > 64) break;
      touch(e, depth + 1);
    }
  }
}

// Reads every byte of a host tensor (out-of-bounds views show up under ASan or as SIGSEGV).
uint64_t checksum(const Tensor& t) {
  uint64_t s = 0;
  if (!t.data) return s;
  const auto* p = static_cast<const uint8_t*>(t.data);
  for (size_t i = 0, n = t.nbytes(); i < n; ++i) s = s * 31 + p[i];
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static MemFile file;
  const std::string& path = file.write(data, size);
  expect_errors([&] {
    auto g = GgufFile::open(path);
    (void)g->version();
    for (const auto& [key, value] : g->metadata()) {
      touch(value, 0);
      (void)g->find(key);
    }
    expect_errors([&] { (void)g->at("general.architecture"); });
    size_t budget = size_t(1) << 20;  // stored bytes converted per input
    volatile uint64_t sink = 0;
    for (const auto& t : g->tensors()) {
      (void)ggml_type_name(t.type);
      (void)t.shape();
      if (g->find_tensor(t.name) == nullptr) __builtin_trap();  // every listed tensor can be found
      if (t.nbytes > budget) continue;
      budget -= t.nbytes;
      expect_errors([&] { sink = sink + checksum(g->load(t)); });
      expect_errors([&] { sink = sink + checksum(g->load(t, true)); });
    }
    expect_errors([&] { (void)gguf_llama_config(*g); });
    if (size <= (size_t(1) << 20))  // the whole checkpoint, linears kept quantized (group-affine)
      expect_errors([&] {
        LoadOptions keep;
        keep.keep_quantized = true;
        keep.quantized_embedding = size > 0 && (data[size / 2] & 1);  // a tied block table kept packed only
        const Checkpoint ck = load_gguf_checkpoint(g, keep);
        for (const auto& [name, e] : ck.quantized)  // each decoded (deferred until read), errors by entry
          expect_errors([&] {
            // A tensor-parallel rank's rows first (decoded alone while the entry is deferred), then all.
            const int64_t half = e.n() / 2;
            const quant::GroupAffineWeight r = e.rows({{half, e.n() - half}, {0, half > 0 ? 1 : 0}});
            if (r.n != e.n() - half + (half > 0 ? 1 : 0) || r.k != e.k() || r.codes.size() != size_t(r.n * r.k))
              __builtin_trap();
            // and a row-parallel rank's input columns, cutting a block: the blocks holding them alone
            const int64_t mid = e.k() / 2 + 1;
            if (mid < e.k()) {
              const quant::GroupAffineWeight c = e.columns({{mid, e.k() - mid}, {0, 1}});
              if (c.n != e.n() || c.k != e.k() - mid + 1 || c.codes.size() != size_t(c.n * c.k)) __builtin_trap();
            }
            const quant::GroupAffineWeight& w = e.weight();
            if (w.n != e.n() || w.k != e.k() || w.codes.size() != size_t(w.n * w.k) ||
                w.scale.size() != size_t(w.n * w.groups()))
              __builtin_trap();
          });
      });
  });
  return 0;
}
