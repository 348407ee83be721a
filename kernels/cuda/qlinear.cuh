// Group-affine quantized linear layer on CUDA (W4A16 / W8A16): out[T,N] = x[T,K] @ w[N,K]^T (+ bias)
// with w[n, k] = scale[n, g] * code[n, k] + offset[n, g], g = k / group (the contract of
// engine/backend/linear_weight.h, the same math as kernels/cpu/qlinear.h). The weight is never
// expanded in memory: the kernel streams the packed codes and dequantizes in registers.
//
// Packed layout (qlinear_pack; rows one after another, qlinear_row_bytes(bits, K) bytes each):
//   4 bits: byte b of a row holds input 2b in its low nibble and input 2b + 1 in its high nibble,
//           so one 16-byte load is 32 consecutive inputs (one 4-byte word: 8 inputs in order).
//   8 bits: the signed codes in order (the canonical bytes as they are).
// K a multiple of 32; group 16 or a multiple of 32 dividing K; scales/offsets [N, K / group], f16 or
// f32 (offsets may be absent: 0).
//
// Two kernels, each batch invariant on its own (no atomics, no T-dependent split-K):
//   qlinear (CUDA cores, qlinear.cu; any activation dtype): a warp owns output rows, each lane a
//     fixed set of 32-input chunks of K; every token's sum is the same sequence of fmaf (ascending k
//     in a lane, then a fixed shuffle tree) whatever T is and whichever tokens share the launch.
//     Shaped for decode (small T): streams the codes once per 1/4/8 tokens.
//   qlinear_mma (tensor cores, qlinear_mma.cu; f16/bf16 activations): tiles of codes dequantized to
//     the activation dtype in shared memory, wmma 16x16x16 with f32 accumulators, K in ascending
//     16-wide steps for every tile shape, so a row's result does not depend on T either.
// The two differ from each other in rounding (the tensor-core path rounds the dequantized weights to
// the activation dtype), so a caller that needs invariance across T uses one of them for every T
// (CudaBackend: qlinear_mma under --deterministic; otherwise qlinear for T <= kQLinearSmallT, and
// past it the faster per shape as measured, qlinear_tuner.h, or qlinear_mma without autotune).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/scalar_types.h"

namespace llmctl::cuda {

struct QLinearParams {
  const void* x = nullptr;        // [T, K] f32/f16/bf16, 16-byte aligned
  DType x_dtype = DType::BF16;
  const uint8_t* packed = nullptr;  // [N, qlinear_row_bytes(bits, K)], 16-byte aligned
  int bits = 4;                   // 4 or 8
  int group = 32;
  const void* scale = nullptr;    // [N, K / group]
  const void* offset = nullptr;   // [N, K / group] or null (offsets 0)
  DType scale_dtype = DType::F16; // F16 or F32 (scale and offset)
  const void* bias = nullptr;     // [N] or null
  DType bias_dtype = DType::F32;
  void* out = nullptr;            // [T, N] f32/f16/bf16
  DType out_dtype = DType::BF16;
  int64_t T = 0, N = 0, K = 0;
};

int64_t qlinear_row_bytes(int bits, int64_t K);
// codes [n, k] one per byte (4 bits: 0..15; 8 bits: int8 bit patterns) -> out [n, row bytes]. Host.
void qlinear_pack(int bits, int64_t n, int64_t k, const uint8_t* codes, uint8_t* out);
// Throws KernelError, naming `who`, for an unsupported bits, K, group, dtype or alignment (the
// checks both kernels share).
void check_qlinear_params(const QLinearParams& p, const char* who);
// Throws KernelError for an unsupported shape, dtype or alignment.
void qlinear(const QLinearParams& p, cudaStream_t stream);
// The tensor-core form: x and out f16/bf16 (out may also be f32), same checks otherwise.
bool qlinear_mma_fits(const QLinearParams& p);
void qlinear_mma(const QLinearParams& p, cudaStream_t stream);
constexpr int64_t kQLinearSmallT = 8;  // up to this many tokens the CUDA-core kernel is the default
// Several CUDA-core qlinear calls in one launch (a mixture of experts' routed experts, each over its
// tokens' rows): each item's output is, bit for bit, qlinear(item)'s. The items share bits and the
// activation dtype, and none has more than kQLinearSmallT tokens (their own N, K, group, scales,
// offsets, bias and output dtype). items[count]: host copies (checked here); dev_items: the same
// array on the device, its copy ordered on `stream` before this launch (the caller uploads it).
void qlinear_grouped(const QLinearParams* items, int count, const QLinearParams* dev_items, cudaStream_t stream);
// Act-order weights (engine/backend/linear_weight.h, input_perm): out[t, j] = x[t, perm[j]] for x,
// out [T, K] f32/f16/bf16 (distinct buffers), perm [K] on the device. The qlinear input then.
void qlinear_gather_columns(const void* x, DType dtype, const int32_t* perm, int64_t T, int64_t K, void* out,
                            cudaStream_t stream);

}  // namespace llmctl::cuda
