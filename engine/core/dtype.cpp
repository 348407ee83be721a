#include "engine/core/dtype.h"

#include "engine/core/error.h"

namespace llmctl {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::I8: return 1;
    case DType::U8: return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::I8: return "i8";
    case DType::U8: return "u8";
  }
  return "?";
}

DType parse_dtype(std::string_view name) {
  if (name == "f32" || name == "float32" || name == "fp32") return DType::F32;
  if (name == "f16" || name == "float16" || name == "fp16") return DType::F16;
  if (name == "bf16" || name == "bfloat16") return DType::BF16;
  LLM_THROW() << "unknown dtype '" << name << "' (expected f32, f16 or bf16)";
}

}  // namespace llmctl
