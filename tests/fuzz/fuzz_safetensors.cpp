// safetensors reader: the input is a whole .safetensors file (memfd, opened by path). Opening
// validates the header; every tensor view is then read in full and small ones converted to f32.
#include <cstdint>

#include "engine/model/safetensors.h"
#include "tests/fuzz/fuzz_util.h"

using namespace llmctl;
using namespace llmctl::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static MemFile file;
  const std::string& path = file.write(data, size);
  expect_errors([&] {
    auto f = SafetensorsFile::open(path);
    for (const auto& [k, v] : f->metadata()) (void)(k.size() + v.size());
    volatile uint64_t sink = 0;
    for (const auto& [name, t] : f->tensors()) {
      if (!f->has(name)) __builtin_trap();
      (void)t.shape_str();
      const auto* p = static_cast<const uint8_t*>(t.data);
      const size_t n = t.nbytes();
      if (n && !p) __builtin_trap();  // a non-empty tensor has data
      uint64_t s = 0;
      for (size_t i = 0; i < n; ++i) s = s * 31 + p[i];
      sink = sink + s;
      if (n <= (size_t(1) << 16)) expect_errors([&] { (void)convert_host(t, DType::F32); });
    }
    expect_errors([&] { (void)f->get("model.embed_tokens.weight"); });
  });
  return 0;
}
