#include "quant/format/packed_tensor.h"

#include <cstring>
#include <stdexcept>

#include "quant/format/half_float.h"

namespace llmctl::quant {

size_t packed_dtype_size(const std::string& dtype) {
  if (dtype == "F32" || dtype == "I32") return 4;
  if (dtype == "F16" || dtype == "BF16") return 2;
  if (dtype == "I64") return 8;
  if (dtype == "I8" || dtype == "U8") return 1;
  throw std::invalid_argument("unknown tensor dtype '" + dtype + "'");
}

int64_t shape_elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

PackedTensorView view_of(const PackedTensor& t) { return {t.dtype, t.shape, t.bytes.data(), t.bytes.size()}; }

namespace {

template <class T>
PackedTensor make_raw(const char* dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
  if (size_t(shape_elements(shape)) != values.size()) throw std::logic_error("packed tensor: shape does not match values");
  PackedTensor t{dtype, std::move(shape), std::vector<uint8_t>(values.size() * sizeof(T))};
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// Checks that the view's byte count matches its shape and dtype.
void check_size(const PackedTensorView& v, const std::string& what) {
  for (int64_t d : v.shape)
    if (d < 0 || d > (int64_t(1) << 40)) throw std::invalid_argument(what + ": bad shape " + shape_str(v.shape));
  const size_t want = size_t(shape_elements(v.shape)) * packed_dtype_size(v.dtype);
  if (v.nbytes != want || (want && !v.data))
    throw std::invalid_argument(what + ": " + std::to_string(v.nbytes) + " bytes for " + v.dtype + " " +
                                shape_str(v.shape));
}

template <class T>
std::vector<T> copy_out(const PackedTensorView& v) {
  std::vector<T> out(v.nbytes / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), v.data, out.size() * sizeof(T));
  return out;
}

}  // namespace

PackedTensor make_i32(std::vector<int64_t> shape, const std::vector<int32_t>& values) {
  return make_raw("I32", std::move(shape), values);
}
PackedTensor make_i64(std::vector<int64_t> shape, const std::vector<int64_t>& values) {
  return make_raw("I64", std::move(shape), values);
}

PackedTensor make_float(std::vector<int64_t> shape, const std::vector<float>& values, const std::string& dtype) {
  if (dtype == "F32") return make_raw("F32", std::move(shape), values);
  std::vector<uint16_t> h(values.size());
  if (dtype == "F16")
    for (size_t i = 0; i < h.size(); ++i) h[i] = f32_to_half_bits(values[i]);
  else if (dtype == "BF16")
    for (size_t i = 0; i < h.size(); ++i) h[i] = f32_to_bf16_bits(values[i]);
  else
    throw std::invalid_argument("scale dtype must be F16, BF16 or F32, not '" + dtype + "'");
  return make_raw(dtype == "F16" ? "F16" : "BF16", std::move(shape), h);
}

std::vector<int32_t> read_i32(const PackedTensorView& v, const std::string& what) {
  if (v.dtype != "I32") throw std::invalid_argument(what + ": dtype " + v.dtype + ", expected I32");
  check_size(v, what);
  return copy_out<int32_t>(v);
}

std::vector<int64_t> read_int_any(const PackedTensorView& v, const std::string& what) {
  if (v.dtype == "I32") {
    auto x = read_i32(v, what);
    return {x.begin(), x.end()};
  }
  if (v.dtype != "I64") throw std::invalid_argument(what + ": dtype " + v.dtype + ", expected I64 or I32");
  check_size(v, what);
  return copy_out<int64_t>(v);
}

std::vector<float> read_float(const PackedTensorView& v, const std::string& what) {
  if (v.dtype != "F32" && v.dtype != "F16" && v.dtype != "BF16")
    throw std::invalid_argument(what + ": dtype " + v.dtype + ", expected F32, F16 or BF16");
  check_size(v, what);
  if (v.dtype == "F32") return copy_out<float>(v);
  std::vector<uint16_t> h = copy_out<uint16_t>(v);
  std::vector<float> out(h.size());
  for (size_t i = 0; i < h.size(); ++i) out[i] = v.dtype == "F16" ? half_bits_to_f32(h[i]) : bf16_bits_to_f32(h[i]);
  return out;
}

}  // namespace llmctl::quant
