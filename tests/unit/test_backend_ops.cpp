// The backend parity table (tests/backend_ops/) on the CPU backend against the naive references.
// The same table runs on the CUDA backend in tests/gpu/test_backend_ops.cpp.
#include <doctest/doctest.h>

#include "../backend_ops/backend_ops_table.h"

using namespace llmctl;

TEST_CASE("backend parity table: the CPU backend against the naive references") {
  for (int threads : {1, 3}) {  // one thread and a row split across threads
    auto be = make_cpu_backend(threads);
    backend_ops::Target target{be.get(), {DType::F32, DType::BF16, DType::F16}};
    const auto counts = backend_ops::run_table(target);
    CHECK(counts.count("sample") == 0);  // the CPU backend samples on the host
  }
}
