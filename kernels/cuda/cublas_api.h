// cuBLAS and cuBLASLt, opened at run time (dlopen) instead of linked. Linking them costs every
// process of a CUDA build about 210 MiB of resident memory at start (their relocations and static
// data), also `llmctl --help`, CPU runs and each CPU tensor-parallel rank; opened here, only a
// process that makes a CUDA backend pays it. Calls go through the table:
//   CUBLAS_CHECK(cuda::cublas_api().cublasGemmEx(handle, ...));
// (members carry the API's names; cublas_v2.h's macros, cublasCreate -> cublasCreate_v2, apply to
// them as to the functions). Plain C++: usable from .cpp and .cu files.
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>

namespace llmctl::cuda {

#define LLMCTL_CUBLAS_FUNCTIONS(X) \
  X(cublasCreate) X(cublasDestroy) X(cublasSetStream) X(cublasSetWorkspace) X(cublasGetStatusString)
#define LLMCTL_CUBLASLT_FUNCTIONS(X)                                                                          \
  X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetVersion) X(cublasLtMatmul) X(cublasLtMatmulDescCreate)   \
  X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute) X(cublasLtMatrixLayoutCreate)              \
  X(cublasLtMatrixLayoutDestroy) X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy)       \
  X(cublasLtMatmulPreferenceSetAttribute) X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmulAlgoCheck)

// cublasGemmEx is overloaded in C++ (cublas_api.h adds one taking a cudaDataType compute type): the
// library's own.
using CublasGemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                          const void*, const void*, cudaDataType, int, const void*, cudaDataType, int,
                                          const void*, void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);

struct CublasApi {
#define LLMCTL_CUBLAS_MEMBER(f) decltype(&::f) f = nullptr;
  LLMCTL_CUBLAS_FUNCTIONS(LLMCTL_CUBLAS_MEMBER)
  LLMCTL_CUBLASLT_FUNCTIONS(LLMCTL_CUBLAS_MEMBER)
#undef LLMCTL_CUBLAS_MEMBER
  CublasGemmExFn cublasGemmEx = nullptr;
  char cublas_path[1024] = {}, cublaslt_path[1024] = {};  // where they were found
};

// Opens libcublasLt.so.<major> and libcublas.so.<major> (the toolkit's major version this build
// was compiled against) on first use: by the loader's search path, then in the toolkit's library
// directory of the build. Throws KernelError naming the library and dlerror()'s reason when one
// cannot be opened or lacks a function.
const CublasApi& cublas_api();

}  // namespace llmctl::cuda
