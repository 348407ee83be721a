// Shared declarations of the variants behind elementwise.h (internal).
#pragma once
#include <cstdint>

namespace llmctl::kernels::detail {

void silu_mul_cols_avx2(const float* gate_up, int64_t I, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* out);
// gelu_tanh_mul_cols (elementwise.h): the portable variant (libm's expf) and the AVX2 one (exp8), each
// within a few ulp of the function, not the same bits.
void gelu_tanh_mul_cols_portable(const float* gate_up, int64_t I, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                                 float* out);
void gelu_tanh_mul_cols_avx2(const float* gate_up, int64_t I, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                             float* out);
// rms_norm_rows (elementwise.h): the portable variant and the AVX2 one, the same bits.
void rms_norm_rows_portable(const float* x, const float* w, float eps, int64_t H, int64_t r0, int64_t r1, float* out,
                            float* residual);
void rms_norm_rows_avx2(const float* x, const float* w, float eps, int64_t H, int64_t r0, int64_t r1, float* out,
                        float* residual);

}  // namespace llmctl::kernels::detail
