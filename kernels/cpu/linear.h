// Dense matrix kernels over plain pointers. The reduction order of every output element is fixed
// (it does not depend on how many tokens are processed together or on the thread split), so a
// request's result is bit-identical alone or in any batch.
#pragma once
#include <cstdint>

namespace llmctl::kernels {

enum class WeightType { F32, F16, BF16 };

// out[t * ldo + n] = sum_k x[t * K + k] * w[n * K + k]  (+ bias[n]) for t < T, n in [n0, n1).
// x f32 [T, K]; w [N, K] of type wt; bias f32 [N] or null.
void linear_rows(const float* x, int64_t T, int64_t K, const void* w, WeightType wt, const float* bias, int64_t n0,
                 int64_t n1, float* out, int64_t ldo);

// sum_i a[i] * b[i], same reduction order as linear_rows.
float dot_f32(const float* a, const float* b, int64_t n);

// True when the AVX2/FMA/F16C variants are in use (reported in stats and bench output).
bool cpu_has_avx2();

}  // namespace llmctl::kernels
