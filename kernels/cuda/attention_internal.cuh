// Launchers shared between the attention translation units (decode and prefill kernels are split
// across files to keep each small and to let nvcc compile them in parallel).
#pragma once
#include <cuda_runtime.h>

#include "kernels/cuda/attention.cuh"

namespace llmctl::cuda {
void launch_attention_decode(const AttentionParams& p, cudaStream_t stream);   // sequences with 1 new token
void launch_attention_prefill(const AttentionParams& p, cudaStream_t stream);  // sequences with >= 2
}  // namespace llmctl::cuda
