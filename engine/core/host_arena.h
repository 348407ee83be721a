// Host memory for many long-lived tensors smaller than a huge page (a model's packed weights, most
// of a small model's bytes): carved in order from chunks that start on 2 MiB boundaries and are
// offered whole to transparent huge pages, so that small weights stream from huge pages as large
// ones do (Tensor::empty_host: a decode step reads every weight, and 4 KiB pages cost a TLB miss
// and a restarted hardware prefetch each). A chunk is freed when the last tensor carved from it is
// (each holds it); a tensor of a huge page or more comes from Tensor::empty_host (host_alloc_huge). Unused chunk tails
// are never touched, so not backed. Thread-safe.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/core/tensor.h"

namespace llmctl {

class HostArena {
 public:
  static constexpr size_t kChunkBytes = size_t(32) << 20;
  static constexpr size_t kAlign = 64;

  // An uninitialized host tensor (64-byte aligned), carved from the current chunk or a new one.
  Tensor empty(DType dtype, std::vector<int64_t> shape);
  // Bytes of chunks this arena has taken (the current one included), for tests and reports.
  size_t chunk_bytes() const;

 private:
  mutable std::mutex mu_;
  std::shared_ptr<uint8_t> chunk_;
  size_t used_ = 0, size_ = 0, taken_ = 0;
};

}  // namespace llmctl
