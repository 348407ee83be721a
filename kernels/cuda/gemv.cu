// Small-T linear layer for decode steps: out[T,N] = alpha * x[T,K] @ w[N,K]^T + beta * out, T <= 4.
// At batch 1 a decode step is a weight read: every weight is used once per token, so the kernel is
// shaped for memory bandwidth, not tensor cores. A block of 128 threads owns RPB consecutive rows of
// w and walks K in 16-byte vectors (8 values), issuing all of an unrolled group's loads before any
// math so that enough bytes are in flight to keep HBM busy; x (at most 4 rows) stays in L1/L2.
// Partial sums are f32, reduced over the warp with shuffles and over the block's 4 warps in shared
// memory. The autotuner (gemm_tuner.cu) times these variants beside cuBLASLt's and keeps the fastest.
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/gemm.cuh"

namespace llmctl::cuda {
namespace {

constexpr int kThreads = 128, kWarps = kThreads / 32;
constexpr int kUnroll = 4;  // 16-byte vectors per row in flight per thread

template <class T>
__device__ __forceinline__ float dot8(const uint4& a, const uint4& b) {
  const T* x = reinterpret_cast<const T*>(&a);
  const T* y = reinterpret_cast<const T*>(&b);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 8; ++i) s = fmaf(to_f32(x[i]), to_f32(y[i]), s);
  return s;
}

// NT: tokens the instance handles at most (rows of x); nt <= NT at run time.
template <class T, class O, int NT, int RPB>
__global__ void __launch_bounds__(kThreads) gemv_kernel(const T* __restrict x, const T* __restrict w, O* __restrict out,
                                                        int nt, int N, int K, float alpha, float beta) {
  const int n0 = blockIdx.x * RPB, tid = threadIdx.x;
  const int K8 = K / 8;  // 16-byte vectors per row
  // Rows past N and tokens past nt read a valid row instead (their sums are never written), so the
  // main loop's loads carry no conditions and all of them can be in flight at once.
  const uint4* wrow[RPB];
  const uint4* xrow[NT];
#pragma unroll
  for (int r = 0; r < RPB; ++r) wrow[r] = reinterpret_cast<const uint4*>(w) + int64_t(min(n0 + r, N - 1)) * K8;
#pragma unroll
  for (int t = 0; t < NT; ++t) xrow[t] = reinterpret_cast<const uint4*>(x) + int64_t(min(t, nt - 1)) * K8;
  float acc[RPB][NT];
#pragma unroll
  for (int r = 0; r < RPB; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = 0.f;

  constexpr int kGroup = kThreads * kUnroll;
  const int full = K8 / kGroup * kGroup;  // vectors covered by whole groups
  for (int c0 = tid; c0 < full; c0 += kGroup) {
    uint4 wr[kUnroll][RPB], xr[kUnroll][NT];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
      for (int r = 0; r < RPB; ++r) wr[u][r] = __ldg(wrow[r] + c0 + u * kThreads);
#pragma unroll
      for (int t = 0; t < NT; ++t) xr[u][t] = __ldg(xrow[t] + c0 + u * kThreads);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int r = 0; r < RPB; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t) acc[r][t] += dot8<T>(wr[u][r], xr[u][t]);
  }
  for (int c = full + tid; c < K8; c += kThreads) {  // the tail: fewer than kGroup vectors
    uint4 wr[RPB], xr[NT];
#pragma unroll
    for (int r = 0; r < RPB; ++r) wr[r] = __ldg(wrow[r] + c);
#pragma unroll
    for (int t = 0; t < NT; ++t) xr[t] = __ldg(xrow[t] + c);
#pragma unroll
    for (int r = 0; r < RPB; ++r)
#pragma unroll
      for (int t = 0; t < NT; ++t) acc[r][t] += dot8<T>(wr[r], xr[t]);
  }

  __shared__ float part[kWarps][RPB * NT];
  const int warp = tid >> 5, lane = tid & 31;
#pragma unroll
  for (int r = 0; r < RPB; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const float s = warp_sum(acc[r][t]);
      if (lane == 0) part[warp][r * NT + t] = s;
    }
  __syncthreads();
  if (tid < RPB * NT) {
    const int r = tid / NT, t = tid % NT, n = n0 + r;
    if (n < N && t < nt) {
      float s = 0.f;
#pragma unroll
      for (int i = 0; i < kWarps; ++i) s += part[i][tid];
      O* o = out + int64_t(t) * N + n;
      float v = alpha * s;
      if (beta != 0.f) v += beta * to_f32(*o);
      *o = from_f32<O>(v);
    }
  }
}

template <class T, class O, int NT>
void launch_nt(const GemmParams& p, int rpb, cudaStream_t stream) {
  const T* x = static_cast<const T*>(p.x);
  const T* w = static_cast<const T*>(p.w);
  O* out = static_cast<O*>(p.out);
  const int nt = int(p.T), N = int(p.N), K = int(p.K);
  const unsigned blocks = unsigned((p.N + rpb - 1) / rpb);
  if (rpb == 2)
    gemv_kernel<T, O, NT, 2><<<blocks, kThreads, 0, stream>>>(x, w, out, nt, N, K, p.alpha, p.beta);
  else
    gemv_kernel<T, O, NT, 4><<<blocks, kThreads, 0, stream>>>(x, w, out, nt, N, K, p.alpha, p.beta);
  CUDA_CHECK_LAUNCH();
}

template <class T, class O>
void launch_out(const GemmParams& p, int rpb, cudaStream_t stream) {
  if (p.T == 1)
    launch_nt<T, O, 1>(p, rpb, stream);
  else
    launch_nt<T, O, kGemvMaxT>(p, rpb, stream);
}

}  // namespace

bool gemv_fits(const GemmParams& p) {
  const auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  return p.T >= 1 && p.T <= kGemvMaxT && p.K % 8 == 0 && p.K < (int64_t(1) << 31) && p.N < (int64_t(1) << 31) &&
         (p.in_dtype == DType::BF16 || p.in_dtype == DType::F16) &&
         (p.out_dtype == p.in_dtype || p.out_dtype == DType::F32) && aligned(p.x) && aligned(p.w);
}

void gemv(const GemmParams& p, int rows_per_block, cudaStream_t stream) {
  KERNEL_CHECK(gemv_fits(p)) << "gemv: unsupported shape T=" << p.T << " N=" << p.N << " K=" << p.K << " ("
                          << dtype_name(p.in_dtype) << " -> " << dtype_name(p.out_dtype) << ")";
  KERNEL_CHECK(rows_per_block == 2 || rows_per_block == 4) << "gemv: rows per block " << rows_per_block;
  if (p.N == 0) return;
  LLMCTL_DISPATCH_HALF(p.in_dtype, T, {
    if (p.out_dtype == DType::F32)
      launch_out<T, float>(p, rows_per_block, stream);
    else
      launch_out<T, T>(p, rows_per_block, stream);
  });
}

}  // namespace llmctl::cuda
