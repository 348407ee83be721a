// Quantized KV cache writes (kv_quant.cuh).
#include <cuda_fp8.h>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/kv_quant.cuh"

namespace llmctl::cuda {
namespace {

constexpr int kMaxPerLane = 8;  // head_dim <= 256

__device__ __forceinline__ float warp_min(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fminf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// One warp per (token, kv head, k or v): blockIdx.y = token, warps over 2 * Hkv rows.
template <class T>
__global__ void kv_quant_write_kernel(KvQuantWriteParams p) {
  const int lane = threadIdx.x & 31;
  const int r = blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
  const int Hkv = p.num_kv_heads, D = p.head_dim;
  if (r >= 2 * Hkv) return;
  const int64_t t = blockIdx.y;
  const int32_t slot = p.slot_mapping[t];
  if (slot < 0) return;
  const bool is_v = r >= Hkv;
  const int h = is_v ? r - Hkv : r;
  const T* src = static_cast<const T*>(p.qkv) + t * int64_t(p.num_q_heads + 2 * Hkv) * D +
                 int64_t(p.num_q_heads + (is_v ? Hkv : 0) + h) * D;
  const int64_t at = int64_t(slot) * Hkv + h;  // (slot, head) row of the cache
  float x[kMaxPerLane];
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) {
    const int d = lane + 32 * i;
    x[i] = d < D ? to_f32(src[d]) : 0.f;
  }
  if (p.kind == KvQuantKind::Int8) {
    float lo = INFINITY, hi = -INFINITY;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i)
      if (lane + 32 * i < D) lo = fminf(lo, x[i]), hi = fmaxf(hi, x[i]);
    lo = warp_min(lo);
    hi = warp_max(hi);
    const float scale = (hi - lo) / 255.0f;
    const float inv = scale > 0 ? 1.0f / scale : 0.0f;  // a constant row: every code -128, exact
    int8_t* q = static_cast<int8_t*>(is_v ? p.v : p.k) + at * D;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d >= D) continue;
      const float c = fminf(fmaxf(rintf(__fmul_rn(__fsub_rn(x[i], lo), inv)), 0.f), 255.f);
      q[d] = int8_t(int(c) - 128);
    }
    if (lane == 0) {
      float* sz = (is_v ? p.v_scale : p.k_scale) + at * 2;
      sz[0] = scale;
      sz[1] = lo;
    }
  } else {
    const float inv = 1.0f / (is_v ? p.v_scale : p.k_scale)[h];
    uint8_t* q = static_cast<uint8_t*>(is_v ? p.v : p.k) + at * D;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < D) q[d] = uint8_t(__nv_cvt_float_to_fp8(__fmul_rn(x[i], inv), __NV_SATFINITE, __NV_E4M3));
    }
  }
}

}  // namespace

void launch_kv_quant_write(const KvQuantWriteParams& p, cudaStream_t stream) {
  KERNEL_CHECK(p.head_dim > 0 && p.head_dim <= 32 * kMaxPerLane) << "kv_quant_write: head_dim " << p.head_dim;
  KERNEL_CHECK(p.num_kv_heads > 0 && p.k && p.v && p.k_scale && p.v_scale && p.slot_mapping)
      << "kv_quant_write: missing cache tensors";
  if (p.num_tokens == 0) return;
  KERNEL_CHECK(p.num_tokens < 65536 * 32) << "kv_quant_write: " << p.num_tokens << " tokens";
  constexpr int kWarpsPerBlock = 4;
  const dim3 grid(unsigned((2 * p.num_kv_heads + kWarpsPerBlock - 1) / kWarpsPerBlock), unsigned(p.num_tokens));
  LLMCTL_DISPATCH_FLOAT(p.dtype, T, {
    kv_quant_write_kernel<T><<<grid, kWarpsPerBlock * 32, 0, stream>>>(p);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace llmctl::cuda
