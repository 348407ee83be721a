#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm.cuh"

namespace llmctl::cuda {
cudaDataType_t cuda_data_type(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    default: KERNEL_CHECK(false) << "gemm: unsupported dtype " << dtype_name(t);
  }
  return CUDA_R_32F;
}

void gemm(cublasHandle_t handle, const GemmParams& p) {
  if (p.T == 0 || p.N == 0) return;
  KERNEL_CHECK(p.K > 0) << "gemm: K must be positive";
  KERNEL_CHECK(p.T < (int64_t(1) << 31) && p.N < (int64_t(1) << 31) && p.K < (int64_t(1) << 31)) << "gemm: too large";
  KERNEL_CHECK(p.in_dtype == p.out_dtype || p.out_dtype == DType::F32) << "gemm: out dtype must match inputs or be f32";
  // f32 inputs keep full f32 math; 16-bit inputs accumulate in f32 on tensor cores.
  const cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  CUBLAS_CHECK(cublas_api().cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, int(p.N), int(p.T), int(p.K), &p.alpha, p.w,
                            cuda_data_type(p.in_dtype), int(p.K), p.x, cuda_data_type(p.in_dtype), int(p.K), &p.beta, p.out,
                            cuda_data_type(p.out_dtype), int(p.N), compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace llmctl::cuda
