// The RTN/GPTQ reference fixture (tests/golden/quant/gptq_fixture.safetensors, written by
// make_gptq_fixture.py from llm-compressor and compressed-tensors): tensors as plain vectors.
#pragma once
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/model/safetensors.h"
#include "quant/format/quantized_linear.h"
#include "source_dir.h"

namespace llmctl::test {

struct QuantFixture {
  std::shared_ptr<SafetensorsFile> file;

  static std::string path() { return std::string(source_dir()) + "/tests/golden/quant/gptq_fixture.safetensors"; }
  // nullptr when the file is absent (the test then skips).
  static std::unique_ptr<QuantFixture> open() {
    if (!std::filesystem::exists(path())) return nullptr;
    auto f = std::make_unique<QuantFixture>();
    f->file = SafetensorsFile::open(path());
    return f;
  }

  const Tensor& get(const std::string& name) const { return file->get(name); }
  std::vector<float> f32(const std::string& name) const {
    Tensor t = convert_host(get(name), DType::F32);
    return std::vector<float>(t.ptr<float>(), t.ptr<float>() + t.numel());
  }
  std::vector<int32_t> i32(const std::string& name) const {
    const Tensor& t = get(name);
    std::vector<int32_t> out(size_t(t.numel()));
    if (t.dtype == DType::I8)
      for (size_t i = 0; i < out.size(); ++i) out[i] = t.ptr<int8_t>()[i];
    else
      std::memcpy(out.data(), t.data, out.size() * sizeof(int32_t));
    return out;
  }
  // Reference codes and zero points are compressed-tensors' signed values; QuantizedLinear's are
  // shifted by 2^(bits-1).
  std::vector<int32_t> unsigned_codes(const std::string& name, int bits) const {
    std::vector<int32_t> v = i32(name);
    for (int32_t& x : v) x += 1 << (bits - 1);
    return v;
  }
};

}  // namespace llmctl::test
