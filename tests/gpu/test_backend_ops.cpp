// The backend parity table (tests/backend_ops/) on the CUDA backend, bf16 and f16 activations,
// against the same naive references as the CPU run (tests/unit/test_backend_ops.cpp), which checks
// the CPU backend against them: both backends agree with one reference.
#include <cstdlib>

#include "../backend_ops/backend_ops_table.h"
#include "gpu_test_util.h"

using namespace llmctl;

TEST_CASE("backend parity table: the CUDA backend against the naive references") {
  for (DType dt : gpu_test::kHalfTypes) {
    // Weights in the compute dtype (the fast path) and in f32 (converted per call).
    backend_ops::Target target{&gpu_test::backend(dt), {dt, DType::F32}};
    const auto counts = backend_ops::run_table(target);
    CHECK(counts.count("sample") == 1);  // CudaBackend samples on the device: the row ran
    CHECK(counts.count("kv_int8") == 1);
    CHECK(counts.count("kv_fp8") == 1);
  }
}
