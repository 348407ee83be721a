// The run-time loading of cuBLAS / cuBLASLt (cublas_api.h). Host code only; C strings (the kernels
// layer instantiates few std::string members, and the layer lint counts the others as borrowed).
#include <dlfcn.h>

#include <cstdio>
#include <sstream>

#include "kernels/cuda/cublas_api.h"
#include "kernels/kernel_check.h"

#ifndef LLMCTL_CUDA_LIBRARY_DIR
#define LLMCTL_CUDA_LIBRARY_DIR ""
#endif

namespace llmctl::cuda {
namespace {

#define LLMCTL_STR2(x) #x
#define LLMCTL_STR(x) LLMCTL_STR2(x)  // the name after macro expansion: cublasCreate -> "cublasCreate_v2"

// libNAME.so.<major>: by the search path first, then from the toolkit the build used; its path
// goes to `path` (a char[1024]).
void* open_library(const char* name, char (&path)[1024]) {
  char so[256], in_toolkit[1024];
  std::snprintf(so, sizeof so, "%s.so.%d", name, CUBLAS_VER_MAJOR);
  std::snprintf(in_toolkit, sizeof in_toolkit, "%s/%s", LLMCTL_CUDA_LIBRARY_DIR, so);
  std::ostringstream reasons;
  for (const char* p : {static_cast<const char*>(so), static_cast<const char*>(in_toolkit)}) {
    if (p == in_toolkit && LLMCTL_CUDA_LIBRARY_DIR[0] == '\0') continue;
    if (void* lib = dlopen(p, RTLD_NOW | RTLD_LOCAL)) {
      std::snprintf(path, sizeof path, "%s", p);
      return lib;
    }
    const char* e = dlerror();
    reasons << (p == so ? "" : "; ") << (e ? e : p);
  }
  KERNEL_FAIL() << "cannot open " << so << " (the CUDA toolkit's cuBLAS, which --device cuda needs): " << reasons.rdbuf();
  return nullptr;  // not reached
}

template <class F>
void resolve(void* lib, F& fn, const char* name, const char* path) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn) KERNEL_FAIL() << path << " has no " << name;
}

}  // namespace

const CublasApi& cublas_api() {
  static const CublasApi api = [] {
    CublasApi a;
    void* lt = open_library("libcublasLt", a.cublaslt_path);  // first: libcublas needs it
    void* blas = open_library("libcublas", a.cublas_path);
#define LLMCTL_RESOLVE_LT(f) resolve(lt, a.f, LLMCTL_STR(f), a.cublaslt_path);
#define LLMCTL_RESOLVE_BLAS(f) resolve(blas, a.f, LLMCTL_STR(f), a.cublas_path);
    LLMCTL_CUBLASLT_FUNCTIONS(LLMCTL_RESOLVE_LT)
    LLMCTL_CUBLAS_FUNCTIONS(LLMCTL_RESOLVE_BLAS)
#undef LLMCTL_RESOLVE_LT
#undef LLMCTL_RESOLVE_BLAS
    resolve(blas, a.cublasGemmEx, "cublasGemmEx", a.cublas_path);
    return a;
  }();
  return api;
}

}  // namespace llmctl::cuda
