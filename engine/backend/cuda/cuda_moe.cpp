// The CUDA backend's mixture-of-experts ops (engine/model/layers/moe_block.h): the row ops, whose
// routing is decided on the host, so each call uploads its rows (and weights) before its kernel; and
// the experts' grouped linears, quantized ones in one launch.
#include <algorithm>
#include <cstring>
#include <vector>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/core/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/moe_rows.cuh"
#include "kernels/cuda/qlinear.cuh"

namespace llmctl {

const int32_t* CudaBackend::upload_rows(std::span<const int32_t> rows, std::span<const float> weights,
                                        const float** dev_weights) {
  const size_t row_bytes = (rows.size() * sizeof(int32_t) + 15) / 16 * 16;
  const size_t bytes = row_bytes + weights.size() * sizeof(float);
  char* dev = static_cast<char*>(grow(moe_dev_, moe_dev_bytes_, bytes));
  std::vector<char> host(bytes);
  std::memcpy(host.data(), rows.data(), rows.size() * sizeof(int32_t));
  std::memcpy(host.data() + row_bytes, weights.data(), weights.size() * sizeof(float));
  // From pageable memory: the call returns once `host` is staged, so it may go out of scope; the
  // stream orders this copy after the kernels that read the previous call's rows.
  CUDA_CHECK(cudaMemcpyAsync(dev, host.data(), bytes, cudaMemcpyHostToDevice, stream_));
  if (dev_weights) *dev_weights = reinterpret_cast<const float*>(dev + row_bytes);
  return reinterpret_cast<const int32_t*>(dev);
}

void CudaBackend::gather_token_rows(const Tensor& x, std::span<const int32_t> rows, Tensor& out) {
  check_device(x, "gather_token_rows x");
  check_device(out, "gather_token_rows out");
  const int64_t C = x.dim(-1), T = x.dim(0), n = int64_t(rows.size());
  LLM_CHECK(out.dim(-1) == C && out.dim(0) >= n) << "gather_token_rows: x " << x.shape_str() << ", out "
                                                 << out.shape_str() << ", " << n << " rows";
  for (int32_t r : rows) LLM_CHECK(r >= 0 && r < T) << "gather_token_rows: row " << r << " of " << T;
  if (n == 0) return;
  const int32_t* dev_rows = upload_rows(rows, {}, nullptr);
  cuda::launch_gather_rows({x.data, x.dtype, dev_rows, out.data, out.dtype, n, C}, stream_);
}

void CudaBackend::scatter_add_rows(const Tensor& y, std::span<const int32_t> rows, std::span<const float> weights,
                                   Tensor& out) {
  check_device(y, "scatter_add_rows y");
  check_device(out, "scatter_add_rows out");
  const int64_t C = out.dim(-1), T = out.dim(0), n = int64_t(rows.size());
  LLM_CHECK(y.dim(-1) == C && y.dim(0) >= n && weights.size() == rows.size() && y.dtype == out.dtype)
      << "scatter_add_rows: y " << y.shape_str() << " " << dtype_name(y.dtype) << ", out " << out.shape_str() << " "
      << dtype_name(out.dtype) << ", " << n << " rows, " << weights.size() << " weights";
  std::vector<bool> seen(size_t(T), false);
  bool distinct = true;
  for (int32_t r : rows) {
    LLM_CHECK(r >= 0 && r < T) << "scatter_add_rows: row " << r << " of " << T;
    distinct = distinct && !seen[size_t(r)];
    seen[size_t(r)] = true;
  }
  if (n == 0) return;
  const float* dev_weights = nullptr;
  const int32_t* dev_rows = upload_rows(rows, weights, &dev_weights);
  cuda::launch_scatter_add_rows({y.data, dev_rows, dev_weights, out.data, out.dtype, n, C, distinct}, stream_);
}

void CudaBackend::run_linear_group(std::span<const GroupedLinear> items) {
  // The items qlinear_grouped takes: quantized, run by the CUDA-core kernel (decode-sized token
  // counts), the bits and activation dtype of the first such item. A routed expert's tokens are few
  // in decode: one launch for all of them instead of one per expert.
  std::vector<cuda::QLinearParams> grouped;
  std::vector<GroupedLinear> rest;
  for (const GroupedLinear& g : items) {
    const int64_t K = g.x.dim(-1), T = g.x.numel() / std::max<int64_t>(K, 1);
    if (runs_cuda_core_qlinear(*g.w, T)) {
      Tensor out = g.out;
      const cuda::QLinearParams p = qlinear_params(g.x, *g.w, nullptr, out);
      if (grouped.empty() || (p.bits == grouped[0].bits && p.x_dtype == grouped[0].x_dtype)) {
        if (p.T > 0 && p.N > 0) grouped.push_back(p);
        continue;
      }
    }
    rest.push_back(g);
  }
  if (grouped.size() == 1) {
    cuda::qlinear(grouped[0], stream_);
  } else if (!grouped.empty()) {
    const size_t bytes = grouped.size() * sizeof(cuda::QLinearParams);
    void* dev = grow(group_dev_, group_dev_bytes_, bytes);
    // From pageable memory, as upload_rows: staged before the call returns; the stream orders it
    // after the kernels that read the previous call's items.
    CUDA_CHECK(cudaMemcpyAsync(dev, grouped.data(), bytes, cudaMemcpyHostToDevice, stream_));
    cuda::qlinear_grouped(grouped.data(), int(grouped.size()), static_cast<const cuda::QLinearParams*>(dev), stream_);
  }
  Backend::run_linear_group(rest);
}

void CudaBackend::fill_zero(Tensor& t) {
  check_device(t, "fill_zero");
  CUDA_CHECK(cudaMemsetAsync(t.data, 0, t.nbytes(), stream_));
}

}  // namespace llmctl
