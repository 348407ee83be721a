// Tensor-core group-affine quantized linear (qlinear.cuh): per BK-input step, the block's x tile
// [BM, BK] is copied and its weight tile [BN, BK] dequantized (scale * code + offset in f32, rounded
// to the activation dtype) into shared memory, then multiplied with wmma 16x16x16 (f32 accumulators).
// Every output element is reduced over K in ascending 16-wide steps whatever the tile shape (steps
// past K are skipped, not added as zeros), so the BM = 16 (decode-sized) and BM = 64 variants give
// the same bits for a row. Slow still (an H200, bench/results/h200-gpu-check/): 99-110 us for a
// 4096 x 4096 int4 weight at any T up to 16, with 32 or 128 inputs a step alike, so the
// dequantization in N / 64 blocks of 4 warps bounds it rather than the K loop's round trips.
// Next: more blocks (K split with a fixed-order reduction), a Marlin-style register-level layout.
#include <mma.h>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/qlinear.cuh"

namespace llmctl::cuda {
namespace {

namespace wmma = nvcuda::wmma;
// smem tiles are [rows][BK + 8] (16-bit): rows of a multiple of 16 bytes plus 16 keep wmma alignment

__device__ __forceinline__ float load_param(const void* p, bool f32, int64_t i) {
  return f32 ? __ldg(static_cast<const float*>(p) + i) : __half2float(static_cast<const __half*>(p)[i]);
}

// 8 dequantized weights as one 16-byte store.
template <class T>
__device__ __forceinline__ void store8(T* dst, const float (&v)[8]) {
  uint4 raw;
  T* h = reinterpret_cast<T*>(&raw);
#pragma unroll
  for (int i = 0; i < 8; ++i) h[i] = from_f32<T>(v[i]);
  *reinterpret_cast<uint4*>(dst) = raw;
}

template <class T, int BITS, int BM, int BN, int BK, int WM, int WN>
__global__ void __launch_bounds__(WM * WN * 32) qlinear_mma_kernel(QLinearParams p) {
  static_assert(BK % 32 == 0, "K is a multiple of 32: a step's 16-wide halves are all in or all out");
  constexpr int NT = WM * WN * 32, FM = BM / WM / 16, FN = BN / WN / 16, LDC = BN + 4, LDT = BK + 8;
  __shared__ __align__(128) T a_s[BM * LDT];
  __shared__ __align__(128) T b_s[BN * LDT];
  __shared__ __align__(128) float c_s[BM * LDC];
  const int64_t m0 = int64_t(blockIdx.y) * BM, n0 = int64_t(blockIdx.x) * BN;
  const int64_t M = p.T, N = p.N, K = p.K, G = K / p.group, row_bytes = BITS == 4 ? K / 2 : K;
  const int warp = threadIdx.x / 32, wm = warp / WN, wn = warp % WN;
  const T* x = static_cast<const T*>(p.x);
  const bool sf32 = p.scale_dtype == DType::F32;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
#pragma unroll
  for (int i = 0; i < FM; ++i)
#pragma unroll
    for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.f);

  for (int64_t k0 = 0; k0 < K; k0 += BK) {
    // x tile: BK / 8 vectors of 8 per row; rows past T and columns past K are zeros.
    for (int v = threadIdx.x; v < BM * (BK / 8); v += NT) {
      const int r = v / (BK / 8), c = (v % (BK / 8)) * 8;
      uint4 val = make_uint4(0, 0, 0, 0);
      if (m0 + r < M && k0 + c < K) val = __ldg(reinterpret_cast<const uint4*>(x + (m0 + r) * K + k0 + c));
      *reinterpret_cast<uint4*>(a_s + r * LDT + c) = val;
    }
    // Weight tile: 16 inputs per item; rows past N and inputs past K are zeros.
    for (int v = threadIdx.x; v < BN * (BK / 16); v += NT) {
      const int r = v / (BK / 16), h = v % (BK / 16);
      const int64_t n = n0 + r;
      float w[2][8];
      if (n < N && k0 + 16 * h < K) {
        const int64_t g = n * G + (k0 + 16 * h) / p.group;
        const float sc = load_param(p.scale, sf32, g), of = p.offset ? load_param(p.offset, sf32, g) : 0.f;
        const uint8_t* row = p.packed + n * row_bytes;
        if constexpr (BITS == 4) {
          const uint2 q = __ldg(reinterpret_cast<const uint2*>(row + k0 / 2 + 8 * h));  // 16 codes
#pragma unroll
          for (int i = 0; i < 16; ++i) {
            const uint32_t word = i < 8 ? q.x : q.y;
            w[i / 8][i % 8] = fmaf(sc, float((word >> (4 * (i % 8))) & 15u), of);
          }
        } else {
          const uint4 q = __ldg(reinterpret_cast<const uint4*>(row + k0 + 16 * h));  // 16 codes
          const uint32_t words[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
          for (int i = 0; i < 16; ++i)
            w[i / 8][i % 8] = fmaf(sc, float(int32_t(words[i / 4] << (24 - 8 * (i % 4))) >> 24), of);
        }
      } else {
#pragma unroll
        for (int i = 0; i < 16; ++i) w[i / 8][i % 8] = 0.f;
      }
      store8<T>(b_s + r * LDT + 16 * h, w[0]);
      store8<T>(b_s + r * LDT + 16 * h + 8, w[1]);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      if (k0 + kk >= K) break;  // the same for the whole block: no zero steps in the sum
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
    const int64_t m = m0 + r, n = n0 + c;
    if (m < M && n < N) {
      const float b = p.bias ? load_dt(p.bias, int(p.bias_dtype), n) : 0.f;
      store_dt(p.out, int(p.out_dtype), m * N + n, c_s[r * LDC + c] + b);
    }
  }
}

template <class T, int BITS>
void launch_typed(const QLinearParams& p, cudaStream_t stream) {
  const unsigned nb = unsigned((p.N + 63) / 64);
  if (p.T <= 16) {  // decode-sized: 16-token tiles, the same K order
    qlinear_mma_kernel<T, BITS, 16, 64, 128, 1, 4><<<dim3(nb, unsigned((p.T + 15) / 16)), 128, 0, stream>>>(p);
  } else {  // static shared memory: 2 x 64 x 72 x 2 + 64 x 68 x 4 bytes = 36 KiB
    qlinear_mma_kernel<T, BITS, 64, 64, 64, 2, 2><<<dim3(nb, unsigned((p.T + 63) / 64)), 128, 0, stream>>>(p);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace

bool qlinear_mma_fits(const QLinearParams& p) {
  const auto half = [](DType t) { return t == DType::F16 || t == DType::BF16; };
  return half(p.x_dtype) && (p.out_dtype == p.x_dtype || p.out_dtype == DType::F32) &&
         (p.T + 15) / 16 < 65535;
}

void qlinear_mma(const QLinearParams& p, cudaStream_t stream) {
  KERNEL_CHECK(qlinear_mma_fits(p)) << "qlinear_mma: x " << dtype_name(p.x_dtype) << ", out "
                                    << dtype_name(p.out_dtype) << ", T " << p.T;
  check_qlinear_params(p, "qlinear_mma");
  if (p.T == 0 || p.N == 0) return;
  LLMCTL_DISPATCH_HALF(p.x_dtype, T, {
    if (p.bits == 4)
      launch_typed<T, 4>(p, stream);
    else
      launch_typed<T, 8>(p, stream);
  });
}

}  // namespace llmctl::cuda
