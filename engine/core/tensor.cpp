#include "engine/core/tensor.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <sstream>

#include "engine/core/error.h"

namespace llmctl {

int64_t Tensor::numel() const {
  // A zero anywhere makes the product 0 even when the other dimensions would overflow.
  for (int64_t d : shape)
    if (d == 0) return 0;
  int64_t n = 1;
  for (int64_t d : shape) LLM_CHECK(!__builtin_mul_overflow(n, d, &n)) << "tensor shape " << shape_str() << " overflows";
  return n;
}

std::string Tensor::shape_str() const {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

Tensor Tensor::empty_host(DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  for (int64_t d : t.shape) LLM_CHECK(d >= 0) << "negative dimension in " << t.shape_str();
  size_t bytes = (t.nbytes() + 63) / 64 * 64;
  void* p = bytes >= kHostHugePage ? host_alloc_huge(bytes) : std::aligned_alloc(64, bytes ? bytes : 64);
  LLM_CHECK(p) << "out of host memory allocating " << bytes << " bytes";
  t.data = p;
  t.owner = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  return t;
}

void* host_alloc_huge(size_t bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, kHostHugePage, bytes) != 0) return nullptr;
  (void)::madvise(p, bytes / kHostHugePage * kHostHugePage, MADV_HUGEPAGE);  // a hint: refused, small pages
  return p;
}

Tensor Tensor::zeros_host(DType dtype, std::vector<int64_t> shape) {
  Tensor t = empty_host(dtype, std::move(shape));
  std::memset(t.data, 0, t.nbytes());
  return t;
}

Tensor Tensor::view(void* data, DType dtype, std::vector<int64_t> shape, std::shared_ptr<void> owner) {
  Tensor t;
  t.data = data;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.owner = std::move(owner);
  return t;
}

namespace {
float load_f32(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::F32: return static_cast<const float*>(p)[i];
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::I8: return float(static_cast<const int8_t*>(p)[i]);  // integer codes (a KV cache's), as values
    case DType::U8: return float(static_cast<const uint8_t*>(p)[i]);
    default: LLM_CHECK(false) << "convert_host: unsupported source dtype " << dtype_name(t);
  }
  return 0;
}
}  // namespace

Tensor convert_host(const Tensor& src, DType to) {
  LLM_CHECK(src.device == Device::CPU) << "convert_host needs a host tensor";
  Tensor out = Tensor::empty_host(to, src.shape);
  int64_t n = src.numel();
  if (src.dtype == to) {
    std::memcpy(out.data, src.data, src.nbytes());
    return out;
  }
  switch (to) {
    case DType::F32:
      for (int64_t i = 0; i < n; ++i) out.ptr<float>()[i] = load_f32(src.data, src.dtype, i);
      break;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) out.ptr<uint16_t>()[i] = f32_to_f16(load_f32(src.data, src.dtype, i));
      break;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) out.ptr<uint16_t>()[i] = f32_to_bf16(load_f32(src.data, src.dtype, i));
      break;
    default: LLM_CHECK(false) << "convert_host: unsupported target dtype " << dtype_name(to);
  }
  return out;
}

}  // namespace llmctl
