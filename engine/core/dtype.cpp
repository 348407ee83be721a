#include "engine/core/dtype.h"

#include "engine/core/error.h"

namespace llmctl {

DType parse_dtype(std::string_view name) {
  if (name == "f32" || name == "float32" || name == "fp32") return DType::F32;
  if (name == "f16" || name == "float16" || name == "fp16") return DType::F16;
  if (name == "bf16" || name == "bfloat16") return DType::BF16;
  LLM_THROW() << "unknown dtype '" << name << "' (expected f32, f16 or bf16)";
}

}  // namespace llmctl
