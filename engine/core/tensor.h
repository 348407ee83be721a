// A Tensor is a typed, shaped view of memory that it may or may not own. Row-major, contiguous.
// Host tensors point at host memory (owned, or a view into a memory-mapped checkpoint); device
// tensors are created by a backend and point at device memory.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/dtype.h"

namespace llmctl {

enum class Device : uint8_t { CPU, CUDA };

struct Tensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  void* data = nullptr;
  Device device = Device::CPU;
  std::shared_ptr<void> owner;  // keeps the storage (buffer or mapping) alive

  int64_t numel() const;
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype); }
  int64_t dim(int i) const { return shape.at(i < 0 ? shape.size() + i : i); }
  int rank() const { return int(shape.size()); }
  bool empty() const { return data == nullptr; }
  std::string shape_str() const;  // "[576, 49152]"

  template <class T>
  T* ptr() {
    return static_cast<T*>(data);
  }
  template <class T>
  const T* ptr() const {
    return static_cast<const T*>(data);
  }

  // Host allocation, 64-byte aligned (of kHostHugePage or more: host_alloc_huge), uninitialized.
  static Tensor empty_host(DType dtype, std::vector<int64_t> shape);
  static Tensor zeros_host(DType dtype, std::vector<int64_t> shape);
  // A view of memory owned by someone else.
  static Tensor view(void* data, DType dtype, std::vector<int64_t> shape, std::shared_ptr<void> owner = {});
};

// A transparent huge page (the kernel's, offered with madvise).
constexpr size_t kHostHugePage = size_t(2) << 20;
// `bytes` (kHostHugePage or more) starting on a huge-page boundary, its whole huge pages offered to
// transparent huge pages (the tail stays in 4 KiB pages: nothing past it is backed); free with
// std::free. A decode step streams every weight, and on 4 KiB pages each one costs a TLB miss and a
// restarted hardware prefetch. Null when out of memory.
void* host_alloc_huge(size_t bytes);

// Returns a host tensor of `to` holding `src` converted element by element (copies even when the
// dtype is the same).
Tensor convert_host(const Tensor& src, DType to);

}  // namespace llmctl
