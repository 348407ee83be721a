// Batch-invariant GEMM for --deterministic: out[T,N] = x[T,K] @ w[N,K]^T on tensor cores (wmma
// 16x16x16, f32 accumulators). Every output element is reduced over K in the same order (16-wide
// steps, ascending, no split-K) whatever T is and whichever tile shape is picked, so a row's result
// does not depend on the other rows in the batch. cuBLAS picks algorithms by shape and does not
// promise that.
#include <mma.h>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/gemm.cuh"

namespace llmctl::cuda {
namespace {

namespace wmma = nvcuda::wmma;
constexpr int BK = 32, LDT = BK + 8;  // smem tiles [rows][LDT] (16-bit): 80-byte rows keep wmma alignment

// Block tile BM x BN, warps WM x WN, each warp (BM/WM) x (BN/WN) in 16x16 fragments.
template <class T, class OutT, int BM, int BN, int WM, int WN>
__global__ void __launch_bounds__(WM * WN * 32) gemm_invariant_kernel(const T* __restrict x, const T* __restrict w,
                                                                      OutT* __restrict out, int M, int N, int K) {
  constexpr int NT = WM * WN * 32, FM = BM / WM / 16, FN = BN / WN / 16, LDC = BN + 4;
  __shared__ __align__(128) T a_s[BM * LDT];
  __shared__ __align__(128) T b_s[BN * LDT];
  __shared__ __align__(128) float c_s[BM * LDC];
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int warp = threadIdx.x / 32, wm = warp / WN, wn = warp % WN;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.f);

  for (int k0 = 0; k0 < K; k0 += BK) {
    // 8-element vectors; rows or columns outside the matrix load zeros.
    for (int v = threadIdx.x; v < (BM + BN) * (BK / 8); v += NT) {
      const bool is_a = v < BM * (BK / 8);
      const int vv = is_a ? v : v - BM * (BK / 8);
      const int r = vv / (BK / 8), c = (vv % (BK / 8)) * 8;
      const int grow = (is_a ? m0 : n0) + r, gk = k0 + c;
      uint4 val = make_uint4(0, 0, 0, 0);
      if (grow < (is_a ? M : N) && gk < K)
        val = *reinterpret_cast<const uint4*>((is_a ? x : w) + int64_t(grow) * K + gk);
      *reinterpret_cast<uint4*>((is_a ? a_s : b_s) + r * LDT + c) = val;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa[FM];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb[FN];
#pragma unroll
      for (int i = 0; i < FM; ++i) wmma::load_matrix_sync(fa[i], a_s + (wm * FM * 16 + i * 16) * LDT + kk, LDT);
#pragma unroll
      for (int j = 0; j < FN; ++j) wmma::load_matrix_sync(fb[j], b_s + (wn * FN * 16 + j * 16) * LDT + kk, LDT);
#pragma unroll
      for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j)
      wmma::store_matrix_sync(c_s + (wm * FM * 16 + i * 16) * LDC + wn * FN * 16 + j * 16, acc[i][j], LDC,
                              wmma::mem_row_major);
  __syncthreads();
  for (int e = threadIdx.x; e < BM * BN; e += NT) {
    const int r = e / BN, c = e % BN;
    if (m0 + r < M && n0 + c < N) out[int64_t(m0 + r) * N + n0 + c] = from_f32<OutT>(c_s[r * LDC + c]);
  }
}

template <class T, class OutT>
void launch_typed(const GemmParams& p, cudaStream_t stream) {
  const int M = int(p.T), N = int(p.N), K = int(p.K);
  const T* x = static_cast<const T*>(p.x);
  const T* w = static_cast<const T*>(p.w);
  OutT* out = static_cast<OutT*>(p.out);
  if (M <= 16) {  // decode: more, narrower blocks; the same K order
    gemm_invariant_kernel<T, OutT, 16, 64, 1, 4><<<dim3(unsigned((N + 63) / 64), unsigned((M + 15) / 16)), 128, 0,
                                                   stream>>>(x, w, out, M, N, K);
  } else {
    gemm_invariant_kernel<T, OutT, 64, 64, 2, 2><<<dim3(unsigned((N + 63) / 64), unsigned((M + 63) / 64)), 128, 0,
                                                   stream>>>(x, w, out, M, N, K);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void gemm_invariant(const GemmParams& p, cudaStream_t stream) {
  if (p.T == 0 || p.N == 0) return;
  KERNEL_CHECK(p.in_dtype == DType::F16 || p.in_dtype == DType::BF16) << "gemm_invariant: f16 or bf16 inputs";
  KERNEL_CHECK(p.out_dtype == p.in_dtype || p.out_dtype == DType::F32) << "gemm_invariant: out dtype";
  KERNEL_CHECK(p.K > 0 && p.K % 8 == 0) << "gemm_invariant: K (" << p.K << ") must be a multiple of 8";
  KERNEL_CHECK(p.alpha == 1.f && p.beta == 0.f) << "gemm_invariant: alpha 1, beta 0 only";
  KERNEL_CHECK(p.T < (int64_t(1) << 31) / 64 && p.N < (int64_t(1) << 31) && p.K < (int64_t(1) << 31))
      << "gemm_invariant: too large";
  KERNEL_CHECK(reinterpret_cast<uintptr_t>(p.x) % 16 == 0 && reinterpret_cast<uintptr_t>(p.w) % 16 == 0)
      << "gemm_invariant: inputs must be 16-byte aligned";
  LLMCTL_DISPATCH_HALF(p.in_dtype, T, {
    if (p.out_dtype == DType::F32)
      launch_typed<T, float>(p, stream);
    else
      launch_typed<T, T>(p, stream);
  });
}

}  // namespace llmctl::cuda
