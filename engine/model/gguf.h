// GGUF v3 reader over a memory mapping. Every count, length and offset is bounds-checked against
// the file: a malformed file raises InputError, never reads out of bounds.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "engine/core/mapped_file.h"
#include "engine/core/tensor.h"

namespace llmctl {

// GGML tensor types that may appear in a GGUF file (numbering as in the GGUF spec).
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, BF16 = 30,
};
const char* ggml_type_name(GgmlType t);

// A metadata value: scalars, strings, or arrays of one element type.
struct GgufValue {
  using Array = std::vector<GgufValue>;
  std::variant<uint64_t, int64_t, double, bool, std::string, std::shared_ptr<Array>> v;

  bool is_string() const { return std::holds_alternative<std::string>(v); }
  bool is_array() const { return std::holds_alternative<std::shared_ptr<Array>>(v); }
  const std::string& as_string() const;   // throws InputError when not a string
  int64_t as_int() const;                 // any integer type (or bool); throws otherwise
  double as_float() const;                // float or integer
  bool as_bool() const;
  const Array& as_array() const;
};

struct GgufTensorInfo {
  std::string name;
  GgmlType type;
  std::vector<int64_t> ne;   // GGUF order: ne[0] is the fastest-varying dimension
  uint64_t offset = 0;       // relative to the data section
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  // Row-major shape (reverse of ne), as the tensor reads in HF/numpy order.
  std::vector<int64_t> shape() const { return {ne.rbegin(), ne.rend()}; }
};

class GgufFile {
 public:
  static std::shared_ptr<GgufFile> open(const std::string& path);

  uint32_t version() const { return version_; }
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const GgufValue* find(const std::string& key) const;  // nullptr when absent
  const GgufValue& at(const std::string& key) const;     // throws InputError naming the key
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  const std::string& path() const { return file_->path(); }

  // The tensor in f32 (F32 copied, F16/BF16 converted, quantized blocks dequantized), or, for
  // F16/BF16 with keep_float, a view in its stored dtype. Row-major shape.
  Tensor load(const GgufTensorInfo& t, bool keep_float = false) const;

 private:
  std::shared_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
};

}  // namespace llmctl
