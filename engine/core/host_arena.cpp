#include "engine/core/host_arena.h"

#include <cstdlib>

#include "engine/core/error.h"

namespace llmctl {

Tensor HostArena::empty(DType dtype, std::vector<int64_t> shape) {
  Tensor t = Tensor::view(nullptr, dtype, std::move(shape));
  for (int64_t d : t.shape) LLM_CHECK(d >= 0) << "negative dimension in " << t.shape_str();
  const size_t bytes = (t.nbytes() + kAlign - 1) / kAlign * kAlign;
  if (bytes >= kHostHugePage) return Tensor::empty_host(dtype, t.shape);  // its own huge pages
  std::lock_guard<std::mutex> lk(mu_);
  if (!chunk_ || size_ - used_ < bytes) {
    void* p = host_alloc_huge(kChunkBytes);
    LLM_CHECK(p) << "out of host memory allocating a " << kChunkBytes << "-byte weight chunk";
    chunk_ = std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [](uint8_t* q) { std::free(q); });
    used_ = 0, size_ = kChunkBytes, taken_ += kChunkBytes;
  }
  t.data = chunk_.get() + used_;
  t.owner = std::shared_ptr<void>(chunk_, t.data);  // holds the chunk
  used_ += bytes ? bytes : kAlign;
  return t;
}

size_t HostArena::chunk_bytes() const {
  std::lock_guard<std::mutex> lk(mu_);
  return taken_;
}

}  // namespace llmctl
