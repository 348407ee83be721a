// A tensor as a checkpoint layout stores it: a safetensors dtype name, a shape and little-endian
// row-major bytes. PackedTensor owns its bytes (what pack_linear_weight writes); PackedTensorView
// points into someone else's (a memory-mapped safetensors file, for unpack_linear_weight).
// No engine dependency: the engine converts to and from its Tensor at the call site.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace llmctl::quant {

struct PackedTensor {
  std::string dtype;  // safetensors names: "I32", "I64", "F16", "BF16", "F32", "I8", "U8"
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // little-endian, row-major
};

struct PackedTensorView {
  std::string dtype;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
};

// Bytes per element of a safetensors dtype name; throws std::invalid_argument for another name.
size_t packed_dtype_size(const std::string& dtype);
// Product of the dims (0 for an empty shape list is not used: a 0-d tensor has 1 element).
int64_t shape_elements(const std::vector<int64_t>& shape);
PackedTensorView view_of(const PackedTensor& t);

// Builders (the host is little-endian, as everywhere llmctl runs).
PackedTensor make_i32(std::vector<int64_t> shape, const std::vector<int32_t>& values);
PackedTensor make_i64(std::vector<int64_t> shape, const std::vector<int64_t>& values);
// Floats stored as dtype "F32", "F16" or "BF16" (round to nearest even).
PackedTensor make_float(std::vector<int64_t> shape, const std::vector<float>& values, const std::string& dtype);

// Readers: check the dtype and that nbytes matches the shape; throw std::invalid_argument naming
// `what` (the tensor) otherwise.
std::vector<int32_t> read_i32(const PackedTensorView& v, const std::string& what);
// I64 or I32 (weight_shape is int64 as torch writes it; accept int32 too).
std::vector<int64_t> read_int_any(const PackedTensorView& v, const std::string& what);
// F32, F16 or BF16, widened to f32 exactly.
std::vector<float> read_float(const PackedTensorView& v, const std::string& what);

}  // namespace llmctl::quant
