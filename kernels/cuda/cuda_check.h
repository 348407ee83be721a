// CUDA_CHECK / CUBLAS_CHECK: turn a failed CUDA runtime or cuBLAS call into llmctl::KernelError with the
// call's file, line and the library's error string. Plain C++ (no device code): usable from .cpp.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kernels/cuda/cublas_api.h"
#include "kernels/kernel_check.h"

#define CUDA_CHECK(call)                                                                          \
  do {                                                                                            \
    cudaError_t err_ = (call);                                                                    \
    if (err_ != cudaSuccess)                                                                      \
      KERNEL_FAIL()                                                                               \
          << __FILE__ << ":" << __LINE__ << ": " #call ": " << cudaGetErrorString(err_);          \
  } while (0)

#define CUBLAS_CHECK(call)                                                                        \
  do {                                                                                            \
    cublasStatus_t st_ = (call);                                                                  \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                             \
      KERNEL_FAIL() << __FILE__ << ":" << __LINE__ << ": " #call ": "                             \
                    << ::llmctl::cuda::cublas_api().cublasGetStatusString(st_);                   \
  } while (0)

// After every kernel launch: catches bad launch configurations (and, asynchronously, earlier faults).
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
