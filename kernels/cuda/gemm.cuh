// Dense linear layer through cuBLAS: out[T,N] = x[T,K] @ w[N,K]^T, row-major, f16/bf16 inputs of
// one dtype, f32 compute (tensor cores). Row-major out^T is column-major [N,T], so this is the
// column-major product out = op(w) * x with w transposed: GEMM(T, N; m=N, n=T, k=K).
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/scalar_types.h"

namespace llmctl::cuda {

struct GemmParams {
  const void* x; const void* w; void* out;
  DType in_dtype;   // x and w (f32, f16 or bf16)
  DType out_dtype;  // out (f32, f16 or bf16; f32 allowed with 16-bit inputs)
  int64_t T, N, K;
  float alpha = 1.f, beta = 0.f;
};
// Uses the stream already set on the handle.
// The CUDA data type of f32, f16 and bf16 (cuBLAS and cuBLASLt); throws for others.
cudaDataType_t cuda_data_type(DType t);

void gemm(cublasHandle_t handle, const GemmParams& p);
// Batch-invariant (gemm_invariant.cu): a row's result does not depend on T; f16/bf16 inputs,
// K a multiple of 8, alpha 1 and beta 0.
void gemm_invariant(const GemmParams& p, cudaStream_t stream);

// Bandwidth-shaped GEMV for decode steps (gemv.cu): T <= kGemvMaxT, 16-bit inputs, K a multiple of 8,
// x and w 16-byte aligned (gemv_fits). Variants differ in output rows per block (kGemvVariants); the
// tuner times them beside cuBLASLt.
constexpr int kGemvMaxT = 4;
constexpr int kGemvVariants[] = {2, 4};
bool gemv_fits(const GemmParams& p);
void gemv(const GemmParams& p, int rows_per_block, cudaStream_t stream);

}  // namespace llmctl::cuda
