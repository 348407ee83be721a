// A CUDA build opens cuBLAS / cuBLASLt at run time (kernels/cuda/cublas_api.h) rather than linking
// them: linked, they cost every process about 210 MiB of resident memory at start, CPU runs
// included. Checked without a GPU: the libraries load without a driver. Skipped in a build without
// CUDA.
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include "skip.h"

#if LLMCTL_HAVE_CUDA
#include "kernels/cuda/cublas_api.h"
#endif

namespace {
bool mapped(const std::string& what) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find(what) != std::string::npos) return true;
  return false;
}
}  // namespace

TEST_CASE("cuBLAS is opened when first asked for, not linked") {
#if LLMCTL_HAVE_CUDA
  CHECK_FALSE(mapped("libcublas"));  // nothing in this CPU test process has made a CUDA backend
  const llmctl::cuda::CublasApi& api = llmctl::cuda::cublas_api();
  CHECK(mapped("libcublasLt.so"));
  CHECK(mapped("libcublas.so"));
  CHECK(api.cublasLtGetVersion() / 10000 == CUBLAS_VER_MAJOR);
  CHECK(bool(api.cublasGemmEx));
  const std::string not_init = api.cublasGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED);
  CHECK(!not_init.empty());
  CHECK(not_init != api.cublasGetStatusString(CUBLAS_STATUS_SUCCESS));  // what CUBLAS_CHECK reports
  MESSAGE("cuBLASLt " << api.cublasLtGetVersion() << " from " << api.cublaslt_path);
#else
  LLMCTL_SKIP("a build without CUDA");
#endif
}
