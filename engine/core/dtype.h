// Element types of tensors: DType and the f16/bf16 <-> f32 conversions live in
// kernels/scalar_types.h (kernels use them and include nothing from engine/); parsing is here.
#pragma once
#include <string>
#include <string_view>

#include "kernels/scalar_types.h"

namespace llmctl {

DType parse_dtype(std::string_view name);  // accepts f32/float32, f16/float16, bf16/bfloat16; throws

}  // namespace llmctl
