// Small memory-bound kernels: embedding lookup, SwiGLU, row gather, bias add, dtype conversion,
// random fill. Activations (x, out) are f32/f16/bf16 given by `dtype`; tables and biases keep their
// own dtype (`*_dtype`). Shapes in the comments; all row-major and contiguous.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/scalar_types.h"

namespace llmctl::cuda {

// out[T,H] = table[ids[t] - vocab_begin, :]   table [V,H]; ids out of [vocab_begin, vocab_begin + V)
// give zero rows (a vocab-parallel rank's shard)
struct EmbedParams {
  const void* table; DType table_dtype;
  const int32_t* ids;
  void* out; DType dtype;
  int64_t num_tokens, hidden, vocab, vocab_begin;
};
void launch_embed(const EmbedParams& p, cudaStream_t stream);

// out[T,I] = silu(gate_up[:, :I]) * gate_up[:, I:]   gate_up [T,2I], same dtype
struct SiluMulParams {
  const void* gate_up; void* out; DType dtype;
  int64_t num_tokens, inter;
};
void launch_silu_mul(const SiluMulParams& p, cudaStream_t stream);
// out[T,I] = gelu_tanh(gate_up[:, :I]) * gate_up[:, I:] (GeGLU), the same shapes
void launch_gelu_tanh_mul(const SiluMulParams& p, cudaStream_t stream);

// x[i] *= s, n elements of dtype
void launch_scale(void* x, DType dtype, int64_t n, float s, cudaStream_t stream);
// x[i] = cap * tanh(x[i] / cap) in place (n elements; cap > 0).
void launch_soft_cap(void* x, DType dtype, int64_t n, float cap, cudaStream_t stream);

// out[R,C] = x[rows[r], :]   x [N,C]; out may have another float dtype than x
struct GatherRowsParams {
  const void* x; DType x_dtype;
  const int32_t* rows;
  void* out; DType out_dtype;
  int64_t num_rows, cols;
};
void launch_gather_rows(const GatherRowsParams& p, cudaStream_t stream);

// out[T,N] += bias[N]
struct BiasAddParams {
  void* out; DType dtype;
  const void* bias; DType bias_dtype;
  int64_t rows, cols;
};
void launch_bias_add(const BiasAddParams& p, cudaStream_t stream);

// dst[i] = src[i] converted (f32/f16/bf16 both ways)
void launch_convert(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n, cudaStream_t stream);

// dst[i] = uniform in [-scale, scale) from a hash of (seed, i): no RNG state, reproducible.
void launch_fill_random(void* dst, DType dtype, int64_t n, uint64_t seed, float scale, cudaStream_t stream);

}  // namespace llmctl::cuda
