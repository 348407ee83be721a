// Group-affine quantized linear (W4A16 / W8A16), see qlinear.cuh for the layout and the invariance
// argument. Shape of the work: a block of 8 warps owns 16 output rows (2 per warp, so each x load
// feeds two rows) and NT tokens (blockIdx.y). A lane takes every 32nd chunk of 32 inputs of K: one
// 16-byte load of 4-bit codes (two of 8-bit) per row, dequantized in registers with the chunk's one
// or two (group 16) scale/offset pairs, then multiplied into NT f32 accumulators per row.
#include <algorithm>
#include <cstring>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/qlinear.cuh"

namespace llmctl::cuda {
namespace {

constexpr int kWarps = 8, kThreads = kWarps * 32;
constexpr int kRowsPerWarp = 2, kRowsPerBlock = kWarps * kRowsPerWarp;

// 8 consecutive activations as f32 (16-bit: one 16-byte load; f32: two).
__device__ __forceinline__ void load_x8(const float* p, float (&f)[8]) {
  const float4 a = __ldg(reinterpret_cast<const float4*>(p)), b = __ldg(reinterpret_cast<const float4*>(p) + 1);
  f[0] = a.x; f[1] = a.y; f[2] = a.z; f[3] = a.w;
  f[4] = b.x; f[5] = b.y; f[6] = b.z; f[7] = b.w;
}
template <class T>
__device__ __forceinline__ void load_x8(const T* p, float (&f)[8]) {
  const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
  const T* h = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < 8; ++i) f[i] = to_f32(h[i]);
}

__device__ __forceinline__ float load_param(const void* p, bool f32, int64_t i) {
  return f32 ? __ldg(static_cast<const float*>(p) + i) : __half2float(static_cast<const __half*>(p)[i]);
}

// Code i (0..7) of piece q (inputs 8q..8q+7 of the chunk) from the chunk's words.
template <int BITS>
__device__ __forceinline__ float code_of(const uint32_t (&wd)[8], int q, int i) {
  if constexpr (BITS == 4) {
    return float((wd[q] >> (4 * i)) & 15u);
  } else {
    const uint32_t word = wd[2 * q + i / 4];
    return float(int32_t(word << (24 - 8 * (i % 4))) >> 24);  // sign-extend byte i % 4
  }
}

// The rows of block bx (16 of them) x the tokens of block by (NT of them), both within p's shape.
template <class T, int BITS, int NT>
__device__ __forceinline__ void qlinear_tile(const QLinearParams& p, int64_t bx, int64_t by) {
  constexpr int R = kRowsPerWarp;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t n0 = (bx * kWarps + warp) * R;
  const int64_t t0 = by * NT;
  const int nt = int(min(int64_t(NT), p.T - t0));
  const int64_t K = p.K, N = p.N, row_bytes = BITS == 4 ? K / 2 : K, G = K / p.group;
  // Rows past N and tokens past nt read a valid row instead; their sums are never written.
  const uint4* wrow[R];
  int64_t srow[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t n = min(n0 + r, N - 1);
    wrow[r] = reinterpret_cast<const uint4*>(p.packed + n * row_bytes);
    srow[r] = n * G;
  }
  const T* xrow[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) xrow[t] = static_cast<const T*>(p.x) + (t0 + min(t, nt - 1)) * K;
  float acc[R][NT];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = 0.f;

  const bool sf32 = p.scale_dtype == DType::F32;
  const int chunks = int(K / 32);
  // One chunk's codes and its one or two (group 16) scale/offset pairs per row.
  struct Chunk {
    uint32_t wd[R][8];
    float sc[R][2], of[R][2];
  };
  const auto load_chunk = [&](int c, Chunk& ch) {
    const int64_t k0 = int64_t(c) * 32;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if constexpr (BITS == 4) {
        const uint4 v = __ldg(wrow[r] + c);
        ch.wd[r][0] = v.x; ch.wd[r][1] = v.y; ch.wd[r][2] = v.z; ch.wd[r][3] = v.w;
      } else {
        const uint4 a = __ldg(wrow[r] + 2 * c), b = __ldg(wrow[r] + 2 * c + 1);
        ch.wd[r][0] = a.x; ch.wd[r][1] = a.y; ch.wd[r][2] = a.z; ch.wd[r][3] = a.w;
        ch.wd[r][4] = b.x; ch.wd[r][5] = b.y; ch.wd[r][6] = b.z; ch.wd[r][7] = b.w;
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // the groups of inputs k0 and k0 + 16 (equal unless group is 16)
        const int64_t g = srow[r] + (k0 + 16 * h) / p.group;
        ch.sc[r][h] = load_param(p.scale, sf32, g);
        ch.of[r][h] = p.offset ? load_param(p.offset, sf32, g) : 0.f;
      }
    }
  };
  const auto use_chunk = [&](int c, const Chunk& ch) {
    const int64_t k0 = int64_t(c) * 32;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      float w[R][8];
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int i = 0; i < 8; ++i) w[r][i] = fmaf(ch.sc[r][q / 2], code_of<BITS>(ch.wd[r], q, i), ch.of[r][q / 2]);
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        float xv[8];
        load_x8(xrow[t] + k0 + 8 * q, xv);
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[r][t] = fmaf(w[r][i], xv[i], acc[r][t]);
      }
    }
  };
  // The lane's chunks c, c + 32, c + 64, ... in ascending order, two loaded before either is used
  // (more bytes in flight); the order of the arithmetic is that of one chunk at a time.
  // (8 tokens a block: one chunk at a time, to stay within the registers.)
  int c = lane;
  if constexpr (NT <= 4) {
    for (; c + 32 < chunks; c += 64) {
      Chunk a, b;
      load_chunk(c, a);
      load_chunk(c + 32, b);
      use_chunk(c, a);
      use_chunk(c + 32, b);
    }
  }
  for (; c < chunks; c += 32) {
    Chunk a;
    load_chunk(c, a);
    use_chunk(c, a);
  }

#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = warp_sum(acc[r][t]);
  if (lane != 0) return;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t n = n0 + r;
    if (n >= N) continue;
    const float b = p.bias ? load_dt(p.bias, int(p.bias_dtype), n) : 0.f;
#pragma unroll
    for (int t = 0; t < NT; ++t)
      if (t < nt) store_dt(p.out, int(p.out_dtype), (t0 + t) * N + n, acc[r][t] + b);
  }
}

template <class T, int BITS, int NT>
__global__ void __launch_bounds__(kThreads) qlinear_kernel(QLinearParams p) {
  qlinear_tile<T, BITS, NT>(p, blockIdx.x, blockIdx.y);
}

// Item blockIdx.z of `items`; blocks past that item's rows or tokens (the grid is sized for the
// largest) return at once.
template <class T, int BITS, int NT>
__global__ void __launch_bounds__(kThreads) qlinear_grouped_kernel(const QLinearParams* __restrict__ items) {
  const QLinearParams p = items[blockIdx.z];
  if (int64_t(blockIdx.x) * kRowsPerBlock >= p.N || int64_t(blockIdx.y) * NT >= p.T) return;
  qlinear_tile<T, BITS, NT>(p, blockIdx.x, blockIdx.y);
}

template <class T, int BITS, int NT>
void launch_nt(const QLinearParams& p, cudaStream_t stream) {
  const dim3 grid(unsigned((p.N + kRowsPerBlock - 1) / kRowsPerBlock), unsigned((p.T + NT - 1) / NT));
  KERNEL_CHECK(grid.y <= 65535u) << "qlinear: T=" << p.T << " too large for one launch";
  qlinear_kernel<T, BITS, NT><<<grid, kThreads, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

// Tokens per block: 1 for T = 1, 4 up to 4, else 8. Each token's arithmetic is the same in every
// instance, so the choice changes speed, not bits.
template <class T, int BITS>
void launch_bits(const QLinearParams& p, cudaStream_t stream) {
  if (p.T == 1)
    launch_nt<T, BITS, 1>(p, stream);
  else if (p.T <= 4)
    launch_nt<T, BITS, 4>(p, stream);
  else
    launch_nt<T, BITS, 8>(p, stream);
}

// Tokens per block as launch_bits picks them for the largest T; every item's T <= kQLinearSmallT = 8,
// so one block of tokens (grid.y 1).
template <class T, int BITS>
void launch_grouped(dim3 grid, int64_t max_t, const QLinearParams* dev_items, cudaStream_t stream) {
  static_assert(kQLinearSmallT <= 8, "one block of tokens an item");
  if (max_t == 1)
    qlinear_grouped_kernel<T, BITS, 1><<<grid, kThreads, 0, stream>>>(dev_items);
  else if (max_t <= 4)
    qlinear_grouped_kernel<T, BITS, 4><<<grid, kThreads, 0, stream>>>(dev_items);
  else
    qlinear_grouped_kernel<T, BITS, 8><<<grid, kThreads, 0, stream>>>(dev_items);
  CUDA_CHECK_LAUNCH();
}

bool is_float_dtype(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// out[t, j] = x[t, perm[j]]; one thread per element, element type by size (2 or 4 bytes).
template <class E>
__global__ void gather_columns_kernel(const E* __restrict__ x, const int32_t* __restrict__ perm, int64_t T, int64_t K,
                                      E* __restrict__ out) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= T * K) return;
  const int64_t t = i / K, j = i - t * K;
  out[i] = x[t * K + perm[j]];
}

}  // namespace

int64_t qlinear_row_bytes(int bits, int64_t K) { return bits == 4 ? K / 2 : K; }

void qlinear_pack(int bits, int64_t n, int64_t k, const uint8_t* codes, uint8_t* out) {
  KERNEL_CHECK((bits == 4 || bits == 8) && k % 32 == 0) << "qlinear_pack: bits " << bits << ", K " << k;
  if (bits == 8) {
    std::memcpy(out, codes, size_t(n * k));
    return;
  }
  for (int64_t i = 0; i < n * k / 2; ++i)
    out[i] = uint8_t((codes[2 * i] & 15u) | ((codes[2 * i + 1] & 15u) << 4));
}

void check_qlinear_params(const QLinearParams& p, const char* who) {
  const auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  KERNEL_CHECK(p.bits == 4 || p.bits == 8) << who << ": bits " << p.bits;
  KERNEL_CHECK(p.K > 0 && p.K % 32 == 0) << who << ": K " << p.K << " is not a multiple of 32";
  KERNEL_CHECK(p.group == 16 || (p.group > 0 && p.group % 32 == 0 && p.K % p.group == 0))
      << who << ": group " << p.group << " for K " << p.K;
  KERNEL_CHECK(p.scale_dtype == DType::F16 || p.scale_dtype == DType::F32)
      << who << ": scales " << dtype_name(p.scale_dtype);
  KERNEL_CHECK(is_float_dtype(p.x_dtype) && is_float_dtype(p.out_dtype) && (!p.bias || is_float_dtype(p.bias_dtype)))
      << who << ": x " << dtype_name(p.x_dtype) << ", out " << dtype_name(p.out_dtype) << ", bias "
      << dtype_name(p.bias_dtype);
  KERNEL_CHECK(p.scale && p.packed && p.x && p.out && aligned(p.x) && aligned(p.packed))
      << who << ": x and the codes must be 16-byte aligned device pointers";
}

void qlinear(const QLinearParams& p, cudaStream_t stream) {
  check_qlinear_params(p, "qlinear");
  if (p.T == 0 || p.N == 0) return;
  LLMCTL_DISPATCH_FLOAT(p.x_dtype, T, {
    if (p.bits == 4)
      launch_bits<T, 4>(p, stream);
    else
      launch_bits<T, 8>(p, stream);
  });
}

void qlinear_grouped(const QLinearParams* items, int count, const QLinearParams* dev_items, cudaStream_t stream) {
  if (count == 0) return;
  KERNEL_CHECK(items && dev_items && count > 0 && count <= 65535)
      << "qlinear_grouped: " << count << " items (at most 65535), host or device copy null";
  int64_t max_t = 0, max_n = 0;
  for (int i = 0; i < count; ++i) {
    const QLinearParams& p = items[i];
    check_qlinear_params(p, "qlinear_grouped");
    KERNEL_CHECK(p.bits == items[0].bits && p.x_dtype == items[0].x_dtype)
        << "qlinear_grouped: items of " << p.bits << " and " << items[0].bits << " bits, x " << dtype_name(p.x_dtype)
        << " and " << dtype_name(items[0].x_dtype);
    KERNEL_CHECK(p.T >= 0 && p.T <= kQLinearSmallT && p.N >= 0)
        << "qlinear_grouped: T=" << p.T << " (at most " << kQLinearSmallT << "), N=" << p.N;
    max_t = std::max(max_t, p.T);
    max_n = std::max(max_n, p.N);
  }
  if (max_t == 0 || max_n == 0) return;
  // Each token's arithmetic is the same whatever the tokens per block: the bits of qlinear(item).
  const dim3 grid(unsigned((max_n + kRowsPerBlock - 1) / kRowsPerBlock), 1u, unsigned(count));
  LLMCTL_DISPATCH_FLOAT(items[0].x_dtype, T, {
    if (items[0].bits == 4)
      launch_grouped<T, 4>(grid, max_t, dev_items, stream);
    else
      launch_grouped<T, 8>(grid, max_t, dev_items, stream);
  });
}

void qlinear_gather_columns(const void* x, DType dtype, const int32_t* perm, int64_t T, int64_t K, void* out,
                            cudaStream_t stream) {
  KERNEL_CHECK(is_float_dtype(dtype)) << "qlinear_gather_columns: dtype " << dtype_name(dtype);
  KERNEL_CHECK(x && perm && out && x != out) << "qlinear_gather_columns: null or in-place pointers";
  const int64_t n = T * K;
  if (n == 0) return;
  const int threads = 256;
  const int64_t blocks = (n + threads - 1) / threads;
  KERNEL_CHECK(blocks <= 0x7fffffff) << "qlinear_gather_columns: [" << T << ", " << K << "] too large";
  if (dtype == DType::F32)
    gather_columns_kernel<uint32_t><<<unsigned(blocks), threads, 0, stream>>>(
        static_cast<const uint32_t*>(x), perm, T, K, static_cast<uint32_t*>(out));
  else
    gather_columns_kernel<uint16_t><<<unsigned(blocks), threads, 0, stream>>>(
        static_cast<const uint16_t*>(x), perm, T, K, static_cast<uint16_t*>(out));
  CUDA_CHECK_LAUNCH();
}

}  // namespace llmctl::cuda
