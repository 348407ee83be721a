// Helpers for the GPU tests: random host inputs rounded to the tested dtype (the references use the
// rounded values, in double), NaN-poisoned outputs, and error norms.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/core/tensor.h"
#include "kernels/cuda/cuda_check.h"

namespace llmctl::gpu_test {

// One backend per compute dtype for the whole run (creating cuBLAS handles is slow).
inline CudaBackend& backend(DType dt) {
  static std::map<DType, std::unique_ptr<CudaBackend>> cache;
  auto& b = cache[dt];
  if (!b) b = std::make_unique<CudaBackend>(dt, 0);
  return *b;
}

// A host tensor of `dt` filled with uniform values in [lo, hi) (no exact zeros), and the same values
// as f32 (exactly what the device sees).
struct HostData {
  Tensor t;
  std::vector<float> f;
};
inline HostData random_host(DType dt, std::vector<int64_t> shape, std::mt19937& rng, float lo = -1.f, float hi = 1.f) {
  Tensor x = Tensor::empty_host(DType::F32, shape);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < x.numel(); ++i) {
    float v = u(rng);
    if (v == 0.f) v = 0.5f * hi;
    x.ptr<float>()[i] = v;
  }
  HostData h;
  h.t = convert_host(x, dt);
  Tensor back = convert_host(h.t, DType::F32);
  h.f.assign(back.ptr<float>(), back.ptr<float>() + back.numel());
  return h;
}

// A device tensor whose every byte is 0xff: NaN in f32, f16 and bf16, so unwritten outputs show.
inline Tensor poisoned(CudaBackend& be, DType dt, std::vector<int64_t> shape) {
  Tensor t = be.alloc(dt, std::move(shape));
  CUDA_CHECK(cudaMemsetAsync(t.data, 0xff, t.nbytes(), be.stream()));
  return t;
}

inline std::vector<float> to_vec(CudaBackend& be, const Tensor& t) {
  Tensor h = be.to_host_f32(t);
  return std::vector<float>(h.ptr<float>(), h.ptr<float>() + h.numel());
}

struct Err {
  double rel = 0, max_abs = 0;
  int64_t nonfinite = 0;
};
inline Err compare(const std::vector<float>& out, const std::vector<double>& ref) {
  REQUIRE(out.size() == ref.size());
  double num = 0, den = 0;
  Err e;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) {
      ++e.nonfinite;
      continue;
    }
    const double d = double(out[i]) - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
    e.max_abs = std::max(e.max_abs, std::fabs(d));
  }
  e.rel = e.nonfinite ? INFINITY : std::sqrt(num / std::max(den, 1e-300));
  return e;
}

inline double tolerance(DType dt) { return dt == DType::BF16 ? 1e-2 : dt == DType::F16 ? 2e-3 : 1e-5; }

// Checks and prints one line per case: name, dtype, relative and max abs error.
inline void expect_close(const std::string& what, DType dt, const std::vector<float>& out,
                         const std::vector<double>& ref, double tol_scale = 1.0) {
  const Err e = compare(out, ref);
  std::printf("  %-58s %-4s rel %.3e  max_abs %.3e%s\n", what.c_str(), dtype_name(dt), e.rel, e.max_abs,
              e.nonfinite ? "  NONFINITE" : "");
  INFO(what << " " << dtype_name(dt) << ": rel " << e.rel << " max_abs " << e.max_abs << " nonfinite " << e.nonfinite);
  CHECK(e.nonfinite == 0);
  CHECK(e.rel < tolerance(dt) * tol_scale);
}

inline const DType kHalfTypes[] = {DType::BF16, DType::F16};

}  // namespace llmctl::gpu_test
