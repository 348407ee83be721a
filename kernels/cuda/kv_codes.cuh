// Reading a paged KV cache's rows inside the attention kernels, whatever the cache stores
// (attention.cuh, KvStorage): 8 consecutive elements of one (slot, kv head) row come back as 8
// values of the activation dtype T in a uint4, the shape the dense kernels load. A quantized row
// is dequantized in registers with the arithmetic of kv_quant.cuh and rounded to T, so attention
// over the codes gives the bits the dense kernels give over a dequantized copy of the cache.
// The load and the conversion are separate calls so that a kernel can issue several loads before
// it uses any of them. Only .cu files include this.
#pragma once
#include <cuda_fp8.h>

#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/cuda_common.cuh"

namespace llmctl::cuda {

__device__ __forceinline__ float fp8_e4m3_value(uint32_t code) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(code & 0xffu), __NV_E4M3);
  return __half2float(__half(h));
}

// The raw bytes of 8 elements: dense 16 bytes, or 8 codes plus the row's (scale, zero) for int8.
struct KvRaw8 {
  uint4 dense;
  uint2 codes;
  float2 scale_zero;
};

// row = slot * Hkv + kv head; c = the first element (a multiple of 8); D = the head dim.
template <class T, KvStorage S>
__device__ __forceinline__ KvRaw8 kv_load8(const void* cache, const float* scales, int64_t row, int D, int c) {
  KvRaw8 r;
  if constexpr (S == KvStorage::Dense) {
    r.dense = *reinterpret_cast<const uint4*>(static_cast<const T*>(cache) + row * D + c);
  } else {
    r.codes = *reinterpret_cast<const uint2*>(static_cast<const uint8_t*>(cache) + row * D + c);
    if constexpr (S == KvStorage::Int8) r.scale_zero = *reinterpret_cast<const float2*>(scales + 2 * row);
  }
  return r;
}

// The 8 values as T. fp8_scale: the kv head's fixed scale (Fp8 only).
template <class T, KvStorage S>
__device__ __forceinline__ uint4 kv_values8(const KvRaw8& r, float fp8_scale) {
  if constexpr (S == KvStorage::Dense) {
    return r.dense;
  } else {
    uint4 out;
    T* o = reinterpret_cast<T*>(&out);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const uint32_t code = ((e < 4 ? r.codes.x : r.codes.y) >> (8 * (e % 4))) & 0xffu;
      float x;
      if constexpr (S == KvStorage::Int8)
        x = fmaf(float(int(int8_t(code)) + 128), r.scale_zero.x, r.scale_zero.y);
      else
        x = __fmul_rn(fp8_e4m3_value(code), fp8_scale);
      o[e] = from_f32<T>(x);
    }
    return out;
  }
}

// Dispatch over the storage at run time for a launcher: `S` names a constexpr KvStorage in body.
#define LLMCTL_DISPATCH_KV_STORAGE(storage, S, ...)                                   \
  do {                                                                                \
    switch (storage) {                                                                \
      case ::llmctl::cuda::KvStorage::Int8: {                                         \
        constexpr ::llmctl::cuda::KvStorage S = ::llmctl::cuda::KvStorage::Int8;      \
        __VA_ARGS__;                                                                  \
      } break;                                                                        \
      case ::llmctl::cuda::KvStorage::Fp8: {                                          \
        constexpr ::llmctl::cuda::KvStorage S = ::llmctl::cuda::KvStorage::Fp8;       \
        __VA_ARGS__;                                                                  \
      } break;                                                                        \
      default: {                                                                      \
        constexpr ::llmctl::cuda::KvStorage S = ::llmctl::cuda::KvStorage::Dense;     \
        __VA_ARGS__;                                                                  \
      }                                                                               \
    }                                                                                 \
  } while (0)

}  // namespace llmctl::cuda
