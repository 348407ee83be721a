// Entry point: validates the parameters and runs the decode and/or prefill kernels.
#include <cstdint>

#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/attention_internal.cuh"
#include "kernels/cuda/cuda_check.h"

namespace llmctl::cuda {

void launch_attention(const AttentionParams& p, cudaStream_t stream) {
  KERNEL_CHECK(p.dtype == DType::F16 || p.dtype == DType::BF16) << "attention: dtype must be f16 or bf16, got "
                                                             << dtype_name(p.dtype);
  KERNEL_CHECK(p.head_dim == 64 || p.head_dim == 128) << "attention: head_dim " << p.head_dim << " (64 or 128)";
  KERNEL_CHECK(p.num_kv_heads > 0 && p.num_q_heads % p.num_kv_heads == 0) << "attention: Hq % Hkv != 0";
  KERNEL_CHECK(p.block_size > 0 && p.max_blocks_per_seq > 0) << "attention: block table";
  KERNEL_CHECK(p.num_seqs < 65536 && p.num_q_heads < 65536 && (!p.token_seq || p.num_tokens < 65536))
      << "attention: grid too large (" << p.num_seqs << " sequences, " << p.num_tokens << " tokens in per-token mode)";
  const void* ptrs[] = {p.qkv, p.k_cache, p.v_cache, p.out};
  for (const void* ptr : ptrs)
    KERNEL_CHECK(ptr && reinterpret_cast<uintptr_t>(ptr) % 16 == 0) << "attention: tensors must be 16-byte aligned";
  if (p.kv_storage != KvStorage::Dense)  // int8 scales are read as (scale, zero) pairs
    KERNEL_CHECK(p.k_scale && p.v_scale && reinterpret_cast<uintptr_t>(p.k_scale) % 8 == 0 &&
                 reinterpret_cast<uintptr_t>(p.v_scale) % 8 == 0)
        << "attention: a quantized cache needs 8-byte aligned k_scale and v_scale";
  if (p.exact_slot)  // the prefill kernel reads no exact rows: every token goes through the decode kernel
    KERNEL_CHECK(p.kv_storage == KvStorage::Fp8 && p.token_seq && p.exact_ring_blocks > 0 && p.exact_k &&
                 p.exact_v && reinterpret_cast<uintptr_t>(p.exact_k) % 16 == 0 &&
                 reinterpret_cast<uintptr_t>(p.exact_v) % 16 == 0)
        << "attention: exact KV rows need an fp8 cache, per-token mode and 16-byte aligned rows";
  if (p.num_seqs == 0) return;
  KERNEL_CHECK(p.fixed_partition_len % 128 == 0 && p.fixed_partition_len <= 1024) << "attention: fixed partition";
  if (p.token_seq) {  // per-token mode: every token through the decode kernel
    if (p.num_tokens > 0) launch_attention_decode(p, stream);
    return;
  }
  if (p.any_decode) launch_attention_decode(p, stream);
  if (p.any_prefill) launch_attention_prefill(p, stream);
}

}  // namespace llmctl::cuda
