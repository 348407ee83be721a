// Reading a paged KV cache's rows inside the attention kernels, whatever the cache stores
// (attention.cuh, KvStorage): 8 consecutive elements of one (slot, kv head) row come back as 8
// values of the activation dtype T in a uint4, the shape the dense kernels load. A quantized row
// is dequantized in registers with the arithmetic of kv_quant.cuh and rounded to T, so attention
// over the codes gives the bits the dense kernels give over a dequantized copy of the cache.
// The load and the conversion are separate calls so that a kernel can issue several loads before
// it uses any of them. Beside an fp8 cache, the keys and values of a query's own block may come
// from exact rows instead (ExactRows: the step's qkv, or the sequence's ring of earlier rows).
// Only .cu files include this.
#pragma once
#include <cuda_fp8.h>

#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/cuda_common.cuh"

namespace llmctl::cuda {

__device__ __forceinline__ float fp8_e4m3_value(uint32_t code) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(code & 0xffu), __NV_E4M3);
  return __half2float(__half(h));
}

// The raw bytes of 8 elements: dense 16 bytes (a dense cache, or an exact row), or 8 codes plus the
// row's (scale, zero) for int8.
struct KvRaw8 {
  uint4 dense;
  uint2 codes;
  float2 scale_zero;
  bool exact;
};

// row = slot * Hkv + kv head; c = the first element (a multiple of 8); D = the head dim.
template <class T, KvStorage S>
__device__ __forceinline__ KvRaw8 kv_load8(const void* cache, const float* scales, int64_t row, int D, int c) {
  KvRaw8 r;
  r.exact = false;
  if constexpr (S == KvStorage::Dense) {
    r.dense = *reinterpret_cast<const uint4*>(static_cast<const T*>(cache) + row * D + c);
  } else {
    r.codes = *reinterpret_cast<const uint2*>(static_cast<const uint8_t*>(cache) + row * D + c);
    if constexpr (S == KvStorage::Int8) r.scale_zero = *reinterpret_cast<const float2*>(scales + 2 * row);
  }
  return r;
}

// 8 elements of an exact row (T values, 16-byte aligned) from element c.
template <class T>
__device__ __forceinline__ KvRaw8 kv_load8_exact(const T* row, int c) {
  KvRaw8 r;
  r.dense = *reinterpret_cast<const uint4*>(row + c);
  r.exact = true;
  return r;
}

// The 8 values as T. fp8_scale: the kv head's fixed scale (Fp8 only).
template <class T, KvStorage S>
__device__ __forceinline__ uint4 kv_values8(const KvRaw8& r, float fp8_scale) {
  if constexpr (S == KvStorage::Dense) {
    return r.dense;
  } else {
    if (r.exact) return r.dense;
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

// Where one query token finds the exact rows of its sequence (AttentionParams::exact_slot): keys at
// positions >= first are exact, those >= c0 in the step's qkv rows t0 + (q - c0), the others in the
// slot's ring (ring0 = its first row). first = INT_MAX: none.
struct ExactRows {
  int first = 0x7fffffff, c0 = 0, t0 = 0;
  int64_t ring0 = 0;
};
__device__ __forceinline__ ExactRows exact_rows_of(const AttentionParams& p, int s, int position) {
  ExactRows e;
  if (!p.exact_slot) return e;
  const int slot = p.exact_slot[s];
  if (slot < 0) return e;
  e.first = position / p.block_size * p.block_size;
  e.t0 = p.query_start[s];
  e.c0 = p.positions[e.t0];
  e.ring0 = int64_t(slot) * p.exact_ring_blocks * p.block_size;
  return e;
}
// The exact k (or v) row of kv head kvh at position q (q >= e.first): D values of T.
template <class T>
__device__ __forceinline__ const T* exact_row(const AttentionParams& p, const ExactRows& e, int q, int kvh, bool v) {
  const int D = p.head_dim, Hq = p.num_q_heads, Hkv = p.num_kv_heads;
  if (q >= e.c0) {
    const int64_t ld = int64_t(Hq + 2 * Hkv) * D;
    return static_cast<const T*>(p.qkv) + int64_t(e.t0 + (q - e.c0)) * ld + int64_t(Hq + (v ? Hkv : 0) + kvh) * D;
  }
  const int B = p.block_size;
  const int64_t r = e.ring0 + int64_t(q / B % p.exact_ring_blocks) * B + q % B;
  return static_cast<const T*>(v ? p.exact_v : p.exact_k) + (r * Hkv + kvh) * D;
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
