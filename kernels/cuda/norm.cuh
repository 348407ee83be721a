// RMSNorm with an optional fused residual add.
//   without residual: out[t,:] = x[t,:] * rsqrt(mean(x[t,:]^2) + eps) * w
//   with residual:    residual[t,:] += x[t,:]; out = rmsnorm(residual[t,:]) * w
// x, out: [T,H] in `dtype` (f32/f16/bf16); w: [H] in w_dtype; residual: [T,H] in residual_dtype, which
// is either `dtype` or F32 (an f32 residual stream avoids re-rounding the sum every layer). With a
// residual, the norm reads the residual as stored (rounded), so it matches a reference that keeps
// the residual in that dtype. out may alias x. x may also be f32 while out is f16/bf16 (x_f32:
// the first layer normalizes the f32 residual stream itself).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/scalar_types.h"

namespace llmctl::cuda {

struct RmsNormParams {
  const void* x; void* out; DType dtype;
  const void* w; DType w_dtype;
  void* residual = nullptr; DType residual_dtype = DType::F32;
  int64_t rows, hidden;
  float eps;
  bool x_f32 = false;  // x is f32 whatever `dtype` (the output dtype) is
};
void launch_rms_norm(const RmsNormParams& p, cudaStream_t stream);

// In place on qkv [T, (hq + 2 hkv) D] in `dtype`: each q and k head (v untouched) becomes
// rmsnorm(head) * w, w = q_w or k_w ([D] f32), the sum of squares in f32 (Qwen3's q_norm / k_norm).
struct HeadRmsNormParams {
  void* qkv; DType dtype;
  const float* q_w; const float* k_w;
  int64_t rows; int hq, hkv, head_dim;
  float eps;
};
void launch_head_rms_norm(const HeadRmsNormParams& p, cudaStream_t stream);

}  // namespace llmctl::cuda
