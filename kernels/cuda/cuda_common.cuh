// Device-side helpers shared by the kernel families: f32 <-> storage conversions, loads of a
// runtime-typed operand (weights keep their stored dtype), warp/block reductions, and the host
// dispatch over the activation dtype. Only .cu files include this.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/scalar_types.h"
#include "kernels/cuda/cuda_check.h"

namespace llmctl::cuda {

template <class T>
__device__ __forceinline__ float to_f32(T v);
template <>
__device__ __forceinline__ float to_f32<float>(float v) { return v; }
template <>
__device__ __forceinline__ float to_f32<__half>(__half v) { return __half2float(v); }
template <>
__device__ __forceinline__ float to_f32<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// dt is int(DType): F32 = 0, F16 = 1, BF16 = 2 (checked on the host with check_float_dtype).
__device__ __forceinline__ float load_dt(const void* p, int dt, int64_t i) {
  if (dt == int(DType::F32)) return static_cast<const float*>(p)[i];
  if (dt == int(DType::F16)) return __half2float(static_cast<const __half*>(p)[i]);
  return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
}
__device__ __forceinline__ void store_dt(void* p, int dt, int64_t i, float v) {
  if (dt == int(DType::F32)) static_cast<float*>(p)[i] = v;
  else if (dt == int(DType::F16)) static_cast<__half*>(p)[i] = __float2half_rn(v);
  else static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
}

// 8 consecutive 16-bit values (one 16-byte load) -> 8 floats. p must be 16-byte aligned.
template <class T>
__device__ __forceinline__ void load8_f32(const T* p, float (&f)[8]) {
  uint4 raw = *reinterpret_cast<const uint4*>(p);
  const T* h = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < 8; ++i) f[i] = to_f32(h[i]);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets the result.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float part[32];
  __shared__ float total;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < int(blockDim.x >> 5) ? part[lane] : 0.f;
    w = warp_sum(w);
    if (lane == 0) total = w;
  }
  __syncthreads();
  return total;
}

}  // namespace llmctl::cuda

// Runs the statement with `T` bound to the storage type of an activation dtype.
#define LLMCTL_DISPATCH_FLOAT(dtype, T, ...)                                               \
  switch (dtype) {                                                                         \
    case ::llmctl::DType::F32: { using T = float; __VA_ARGS__; } break;                    \
    case ::llmctl::DType::F16: { using T = __half; __VA_ARGS__; } break;                   \
    case ::llmctl::DType::BF16: { using T = __nv_bfloat16; __VA_ARGS__; } break;           \
    default: KERNEL_CHECK(false) << "unsupported dtype " << ::llmctl::dtype_name(dtype);      \
  }
#define LLMCTL_DISPATCH_HALF(dtype, T, ...)                                                \
  switch (dtype) {                                                                         \
    case ::llmctl::DType::F16: { using T = __half; __VA_ARGS__; } break;                   \
    case ::llmctl::DType::BF16: { using T = __nv_bfloat16; __VA_ARGS__; } break;           \
    default: KERNEL_CHECK(false) << "unsupported dtype " << ::llmctl::dtype_name(dtype)       \
                              << " (f16 or bf16 only)";                                    \
  }
