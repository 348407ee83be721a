#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/norm.cuh"

namespace llmctl::cuda {
namespace {

// One block per row. Pass 1 (optionally) updates the residual and sums squares; pass 2 scales.
// Each thread touches the same indices in both passes, so out may alias x.
template <class TX, class T, class R>
__global__ void rms_norm_kernel(RmsNormParams p) {
  const int64_t row = blockIdx.x;
  const TX* x = static_cast<const TX*>(p.x) + row * p.hidden;
  T* out = static_cast<T*>(p.out) + row * p.hidden;
  R* res = p.residual ? static_cast<R*>(p.residual) + row * p.hidden : nullptr;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < p.hidden; i += blockDim.x) {
    float v = to_f32(x[i]);
    if (res) {
      const R r = from_f32<R>(to_f32(res[i]) + v);
      res[i] = r;
      v = to_f32(r);
    }
    ss += v * v;
  }
  const float rstd = rsqrtf(block_sum(ss) / float(p.hidden) + p.eps);
  for (int64_t i = threadIdx.x; i < p.hidden; i += blockDim.x) {
    const float v = res ? to_f32(res[i]) : to_f32(x[i]);
    out[i] = from_f32<T>(v * rstd * load_dt(p.w, int(p.w_dtype), i));
  }
}

// One block per (token, head) of the q and k heads.
template <class T>
__global__ void head_rms_norm_kernel(HeadRmsNormParams p) {
  const int64_t row = blockIdx.x / (p.hq + p.hkv);
  const int head = int(blockIdx.x % (p.hq + p.hkv));
  T* x = static_cast<T*>(p.qkv) + row * int64_t(p.hq + 2 * p.hkv) * p.head_dim + int64_t(head) * p.head_dim;
  const float* w = head < p.hq ? p.q_w : p.k_w;
  float ss = 0.f;
  for (int i = threadIdx.x; i < p.head_dim; i += blockDim.x) {
    const float v = to_f32(x[i]);
    ss += v * v;
  }
  const float rstd = rsqrtf(block_sum(ss) / float(p.head_dim) + p.eps);
  for (int i = threadIdx.x; i < p.head_dim; i += blockDim.x) x[i] = from_f32<T>(to_f32(x[i]) * rstd * w[i]);
}

}  // namespace

void launch_head_rms_norm(const HeadRmsNormParams& p, cudaStream_t stream) {
  if (p.rows == 0) return;
  KERNEL_CHECK(p.head_dim > 0 && p.hq > 0 && p.hkv > 0 && p.rows * (p.hq + p.hkv) < (int64_t(1) << 31))
      << "head_rms_norm: bad shape";
  const unsigned blocks = unsigned(p.rows * (p.hq + p.hkv));
  LLMCTL_DISPATCH_FLOAT(p.dtype, T, { head_rms_norm_kernel<T><<<blocks, 128, 0, stream>>>(p); });
  CUDA_CHECK_LAUNCH();
}

void launch_rms_norm(const RmsNormParams& p, cudaStream_t stream) {
  KERNEL_CHECK(p.w_dtype == DType::F32 || p.w_dtype == DType::F16 || p.w_dtype == DType::BF16)
      << "rms_norm: unsupported weight dtype " << dtype_name(p.w_dtype);
  if (p.rows == 0) return;
  KERNEL_CHECK(p.rows < (int64_t(1) << 31) && p.hidden > 0) << "rms_norm: bad shape";
  const int threads = p.hidden >= 4096 ? 1024 : p.hidden >= 1024 ? 512 : 128;
  const bool f32_res = p.residual && p.residual_dtype == DType::F32;
  KERNEL_CHECK(!p.residual || f32_res || p.residual_dtype == p.dtype)
      << "rms_norm: residual must be f32 or the activation dtype";
  KERNEL_CHECK(!p.x_f32 || !p.residual || f32_res) << "rms_norm: an f32 input needs an f32 residual";
  LLMCTL_DISPATCH_FLOAT(p.dtype, T, {
    if (p.x_f32)
      rms_norm_kernel<float, T, float><<<unsigned(p.rows), threads, 0, stream>>>(p);
    else if (f32_res)
      rms_norm_kernel<T, T, float><<<unsigned(p.rows), threads, 0, stream>>>(p);
    else
      rms_norm_kernel<T, T, T><<<unsigned(p.rows), threads, 0, stream>>>(p);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace llmctl::cuda
