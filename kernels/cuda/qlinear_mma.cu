// Tensor-core group-affine quantized linear (qlinear.cuh): per 32-input step, the block's x tile
// [BM, 32] is copied and its weight tile [BN, 32] dequantized (scale * code + offset in f32, rounded
// to the activation dtype) into shared memory, then multiplied with wmma 16x16x16 (f32 accumulators).
// Every output element is reduced over K in ascending 16-wide steps whatever the tile shape, so
// the BM = 16 (decode-sized) and BM = 64 variants give the same bits for a row.
// Correct first: no double buffering, no Marlin-style register-level repack yet.
#include <mma.h>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/qlinear.cuh"

namespace llmctl::cuda {
namespace {

namespace wmma = nvcuda::wmma;
constexpr int BK = 32, LDT = BK + 8;  // smem tiles [rows][LDT] (16-bit): 80-byte rows keep wmma alignment

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

template <class T, int BITS, int BM, int BN, int WM, int WN>
__global__ void __launch_bounds__(WM * WN * 32) qlinear_mma_kernel(QLinearParams p) {
  constexpr int NT = WM * WN * 32, FM = BM / WM / 16, FN = BN / WN / 16, LDC = BN + 4;
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
    // x tile: 4 vectors of 8 per row; rows past T are zeros.
    for (int v = threadIdx.x; v < BM * (BK / 8); v += NT) {
      const int r = v / (BK / 8), c = (v % (BK / 8)) * 8;
      uint4 val = make_uint4(0, 0, 0, 0);
      if (m0 + r < M) val = __ldg(reinterpret_cast<const uint4*>(x + (m0 + r) * K + k0 + c));
      *reinterpret_cast<uint4*>(a_s + r * LDT + c) = val;
    }
    // Weight tile: 16 inputs (half a step) per item; rows past N are zeros.
    for (int v = threadIdx.x; v < BN * 2; v += NT) {
      const int r = v / 2, h = v % 2;
      const int64_t n = n0 + r;
      float w[2][8];
      if (n < N) {
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
    qlinear_mma_kernel<T, BITS, 16, 64, 1, 4><<<dim3(nb, unsigned((p.T + 15) / 16)), 128, 0, stream>>>(p);
  } else {
    qlinear_mma_kernel<T, BITS, 64, 64, 2, 2><<<dim3(nb, unsigned((p.T + 63) / 64)), 128, 0, stream>>>(p);
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
