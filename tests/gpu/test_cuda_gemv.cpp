// The decode GEMV (kernels/cuda/gemv.cu) against a double reference: every variant, T 1..4, N not a
// multiple of the rows per block, K not a multiple of the 1024-value pass, bf16/f16 inputs, 16-bit
// and f32 outputs, alpha and beta.
#include <string>

#include "gpu_test_util.h"
#include "kernels/cuda/gemm.cuh"

using namespace llmctl;
using namespace llmctl::gpu_test;

TEST_CASE("cuda: decode GEMV, every variant against the reference") {
  std::mt19937 rng(41);
  struct Shape { int N, K; };
  for (DType dt : kHalfTypes) {
    CudaBackend& be = backend(dt);
    for (Shape s : {Shape{1, 8}, Shape{7, 520}, Shape{333, 4104}, Shape{1536, 576}, Shape{4099, 14336}}) {
      for (int T = 1; T <= cuda::kGemvMaxT; ++T) {
        for (DType odt : {dt, DType::F32}) {
          const bool with_beta = T == 2;  // out = 0.5 * x w^T + 2 * out
          HostData x = random_host(dt, {T, s.K}, rng), w = random_host(dt, {s.N, s.K}, rng);
          HostData prior = random_host(odt, {T, s.N}, rng);
          Tensor dx = be.upload(x.t, dt), dw = be.upload(w.t, dt);
          std::vector<double> ref(size_t(T) * s.N);
          for (int t = 0; t < T; ++t)
            for (int n = 0; n < s.N; ++n) {
              double acc = 0;
              for (int k = 0; k < s.K; ++k) acc += double(x.f[size_t(t) * s.K + k]) * w.f[size_t(n) * s.K + k];
              ref[size_t(t) * s.N + n] = with_beta ? 0.5 * acc + 2.0 * prior.f[size_t(t) * s.N + n] : acc;
            }
          for (int rows : cuda::kGemvVariants) {
            Tensor out = with_beta ? be.upload(prior.t, odt) : poisoned(be, odt, {T, s.N});
            cuda::GemmParams gp{dx.data, dw.data, out.data, dt, odt, T, s.N, s.K};
            if (with_beta) gp.alpha = 0.5f, gp.beta = 2.f;
            REQUIRE(cuda::gemv_fits(gp));
            cuda::gemv(gp, rows, be.stream());
            expect_close("gemv rows/block " + std::to_string(rows) + " T=" + std::to_string(T) + " N=" +
                             std::to_string(s.N) + " K=" + std::to_string(s.K) + " out " + dtype_name(odt) +
                             (with_beta ? " beta" : ""),
                         odt == DType::F32 ? dt : odt, to_vec(be, out), ref);
          }
        }
      }
    }
  }
  // What the GEMV does not take goes to cuBLASLt.
  cuda::GemmParams odd{nullptr, nullptr, nullptr, DType::BF16, DType::BF16, 5, 64, 64};
  CHECK_FALSE(cuda::gemv_fits(odd));
  odd.T = 1, odd.K = 60;
  CHECK_FALSE(cuda::gemv_fits(odd));
}
