// Shared declarations of the variants behind elementwise.h (internal).
#pragma once
#include <cstdint>

namespace llmctl::kernels::detail {

void silu_mul_rows_avx2(const float* gate_up, int64_t I, int64_t r0, int64_t r1, float* out);

}  // namespace llmctl::kernels::detail
