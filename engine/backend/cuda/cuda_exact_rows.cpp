// CudaBackend's exact open-block rows beside an fp8 KV cache (engine/backend/kv_exact_rows.h): the
// slots live in device memory (KvExactStore::k_dev / v_dev, [slots, R * B, Hkv, D] of the activation
// dtype: the step's k and v exactly as the attention would have read them from a 16-bit cache).
// attention() reads them in per-token mode (kernels/cuda/attention.cuh, exact_slot) and then calls
// store_exact_rows (kernels/cuda/kv_exact.cuh). Behind the same gate as the fp8 cache.
#include <algorithm>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/core/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kv_exact.cuh"

namespace llmctl {

void CudaBackend::reserve_exact_slots(std::vector<KvLayer>& cache, int slots) {
  for (KvLayer& l : cache) {
    LLM_CHECK(l.exact) << "reserve_exact_slots: a cache without exact rows";
    KvExactStore& e = *l.exact;
    LLM_CHECK(slots >= 0 && slots <= (1 << 20)) << "exact KV slots " << slots;
    const int64_t have = e.device_slots();
    if (slots <= have) continue;
    const int64_t want = std::max<int64_t>({int64_t(slots), 2 * have, 8});
    const std::vector<int64_t> shape = {want, int64_t(e.ring_blocks) * e.block_size, e.kv_heads, e.head_dim};
    Tensor k = alloc(dtype_, shape), v = alloc(dtype_, shape);
    if (have > 0) {  // the slots in use keep their rows
      const size_t bytes = e.k_dev.nbytes();
      CUDA_CHECK(cudaMemcpyAsync(k.data, e.k_dev.data, bytes, cudaMemcpyDeviceToDevice, stream_));
      CUDA_CHECK(cudaMemcpyAsync(v.data, e.v_dev.data, bytes, cudaMemcpyDeviceToDevice, stream_));
    }
    clear_graphs();  // they hold the old addresses
    synchronize();   // the copies are done before the old buffers go
    e.k_dev = std::move(k);
    e.v_dev = std::move(v);
  }
}

void CudaBackend::copy_exact_rows(std::vector<KvLayer>& cache, const std::vector<int32_t>& pairs) {
  LLM_CHECK(pairs.size() % 2 == 0) << "copy_exact_rows: (src, dst) pairs";
  int slots = 0;
  for (int32_t e : pairs) {
    LLM_CHECK(e >= 0) << "copy_exact_rows: slot " << e;
    slots = std::max(slots, e + 1);
  }
  reserve_exact_slots(cache, slots);
  for (KvLayer& l : cache) {
    const KvExactStore& e = *l.exact;
    const size_t slot_bytes = e.k_dev.nbytes() / size_t(e.device_slots());
    for (size_t i = 0; i < pairs.size(); i += 2) {
      const size_t src = size_t(pairs[i]) * slot_bytes, dst = size_t(pairs[i + 1]) * slot_bytes;
      if (src == dst) continue;
      for (const Tensor* t : {&e.k_dev, &e.v_dev})
        CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(t->data) + dst, static_cast<const char*>(t->data) + src,
                                   slot_bytes, cudaMemcpyDeviceToDevice, stream_));
    }
  }
}

void CudaBackend::store_exact_rows(const Tensor& qkv, const KvLayer& cache, const DeviceBatch& b, int hq, int hkv) {
  const KvExactStore& e = *cache.exact;
  cuda::KvExactStoreParams p;
  p.qkv = qkv.data;
  p.dtype = qkv.dtype;
  p.positions = b.positions.ptr<int32_t>();
  p.query_start = b.query_start.ptr<int32_t>();
  p.token_seq = b.token_seq.ptr<int32_t>();
  p.exact_slot = b.exact_slot.ptr<int32_t>();
  p.exact_k = e.k_dev.data;
  p.exact_v = e.v_dev.data;
  p.num_tokens = int(b.positions.numel());
  p.num_q_heads = hq;
  p.num_kv_heads = hkv;
  p.head_dim = int(e.head_dim);
  p.block_size = e.block_size;
  p.ring_blocks = e.ring_blocks;
  cuda::launch_kv_exact_store(p, stream_);
}

}  // namespace llmctl
