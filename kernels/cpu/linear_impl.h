// Shared declarations of the scalar and AVX2 variants behind linear.h (internal).
#pragma once
#include "kernels/cpu/linear.h"

namespace llmctl::kernels::detail {

void linear_rows_scalar(const float* x, int64_t T, int64_t K, const void* w, WeightType wt, const float* bias,
                        int64_t n0, int64_t n1, float* out, int64_t ldo);
float dot_f32_scalar(const float* a, const float* b, int64_t n);

void linear_rows_avx2(const float* x, int64_t T, int64_t K, const void* w, WeightType wt, const float* bias,
                      int64_t n0, int64_t n1, float* out, int64_t ldo);
float dot_f32_avx2(const float* a, const float* b, int64_t n);

}  // namespace llmctl::kernels::detail
