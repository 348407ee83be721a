// Exact open-block rows kept after a step (kv_exact.cuh).
#include <algorithm>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/kv_exact.cuh"

namespace llmctl::cuda {
namespace {

// Block t: token t's k and v rows, 16 bytes a thread a step.
__global__ void kv_exact_store_kernel(KvExactStoreParams p, int elem_bytes) {
  const int t = blockIdx.x;
  const int s = p.token_seq[t];
  const int slot = p.exact_slot[s];
  if (slot < 0) return;
  const int B = p.block_size, R = p.ring_blocks;
  const int t0 = p.query_start[s], t1 = p.query_start[s + 1];
  const int c0 = p.positions[t0], c1 = p.positions[t1 - 1] + 1;
  const int q = p.positions[t];
  if (q < max(c0, ((c1 - 1) / B - (R - 1)) * B)) return;
  const int64_t row_bytes = int64_t(p.num_kv_heads) * p.head_dim * elem_bytes;  // one of k, v
  const int64_t ld = int64_t(p.num_q_heads + 2 * p.num_kv_heads) * p.head_dim * elem_bytes;
  const char* src = static_cast<const char*>(p.qkv) + int64_t(t) * ld + int64_t(p.num_q_heads) * p.head_dim * elem_bytes;
  const int64_t ring_row = int64_t(slot) * R * B + int64_t(q / B % R) * B + q % B;
  char* dk = static_cast<char*>(p.exact_k) + ring_row * row_bytes;
  char* dv = static_cast<char*>(p.exact_v) + ring_row * row_bytes;
  for (int64_t o = int64_t(threadIdx.x) * 16; o < row_bytes; o += int64_t(blockDim.x) * 16) {
    *reinterpret_cast<uint4*>(dk + o) = *reinterpret_cast<const uint4*>(src + o);
    *reinterpret_cast<uint4*>(dv + o) = *reinterpret_cast<const uint4*>(src + row_bytes + o);
  }
}

}  // namespace

void launch_kv_exact_store(const KvExactStoreParams& p, cudaStream_t stream) {
  if (p.num_tokens == 0) return;
  const int elem = int(dtype_size(p.dtype));
  KERNEL_CHECK(p.qkv && p.positions && p.query_start && p.token_seq && p.exact_slot && p.exact_k && p.exact_v)
      << "kv_exact_store: missing arrays";
  KERNEL_CHECK(p.block_size > 0 && p.ring_blocks > 0 && p.num_kv_heads > 0 && p.head_dim > 0)
      << "kv_exact_store: block " << p.block_size << ", ring " << p.ring_blocks;
  // Every row and offset in whole 16-byte vectors: the k and v parts of a qkv row and the ring rows.
  KERNEL_CHECK(int64_t(p.num_kv_heads) * p.head_dim * elem % 16 == 0 && int64_t(p.num_q_heads) * p.head_dim * elem % 16 == 0)
      << "kv_exact_store: heads " << p.num_q_heads << "/" << p.num_kv_heads << " x " << p.head_dim << " not in 16-byte rows";
  for (const void* ptr : {p.qkv, static_cast<const void*>(p.exact_k), static_cast<const void*>(p.exact_v)})
    KERNEL_CHECK(reinterpret_cast<uintptr_t>(ptr) % 16 == 0) << "kv_exact_store: tensors must be 16-byte aligned";
  KERNEL_CHECK(p.num_tokens < (1 << 30)) << "kv_exact_store: " << p.num_tokens << " tokens";
  kv_exact_store_kernel<<<unsigned(p.num_tokens), 128, 0, stream>>>(p, elem);
  CUDA_CHECK_LAUNCH();
}

}  // namespace llmctl::cuda
