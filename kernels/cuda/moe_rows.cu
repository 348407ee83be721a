#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/moe_rows.cuh"

namespace llmctl::cuda {
namespace {

constexpr int kThreads = 256;

// Block (x, y): columns x * kThreads.., rows y, y + gridDim.y, ... (gridDim.y == 1: every row, in order).
template <class T>
__global__ void scatter_add_rows_kernel(ScatterAddRowsParams p) {
  const int64_t c = blockIdx.x * int64_t(kThreads) + threadIdx.x;
  if (c >= p.cols) return;
  const T* y = static_cast<const T*>(p.y);
  T* out = static_cast<T*>(p.out);
  for (int64_t i = blockIdx.y; i < p.n; i += gridDim.y) {
    T* dst = out + int64_t(p.rows[i]) * p.cols + c;
    *dst = from_f32<T>(to_f32(*dst) + p.weights[i] * to_f32(y[i * p.cols + c]));
  }
}

}  // namespace

void launch_scatter_add_rows(const ScatterAddRowsParams& p, cudaStream_t stream) {
  KERNEL_CHECK(p.dtype == DType::F32 || p.dtype == DType::F16 || p.dtype == DType::BF16)
      << "scatter_add_rows: unsupported dtype " << dtype_name(p.dtype);
  if (p.n == 0 || p.cols == 0) return;
  const dim3 grid(unsigned((p.cols + kThreads - 1) / kThreads),
                  p.distinct_rows ? unsigned(p.n < 65535 ? p.n : 65535) : 1u);
  LLMCTL_DISPATCH_FLOAT(p.dtype, T, scatter_add_rows_kernel<T><<<grid, kThreads, 0, stream>>>(p));
  CUDA_CHECK_LAUNCH();
}

}  // namespace llmctl::cuda
