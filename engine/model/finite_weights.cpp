#include "engine/model/finite_weights.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "engine/core/error.h"

namespace llmctl {

namespace {

// The index of the first element whose exponent bits are all ones (inf or NaN), or -1. Words of
// `Bits` bits; `exp` is the exponent mask. Branch-free over blocks, so the common case vectorizes.
template <class Bits>
int64_t first_non_finite(const void* data, int64_t n, Bits exp) {
  const auto* p = static_cast<const uint8_t*>(data);
  constexpr int64_t kBlock = 4096;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = std::min(n, b + kBlock);
    bool bad = false;
    for (int64_t i = b; i < e; ++i) {
      Bits v;
      std::memcpy(&v, p + i * int64_t(sizeof(Bits)), sizeof(Bits));
      bad |= (v & exp) == exp;
    }
    if (!bad) continue;
    for (int64_t i = b; i < e; ++i) {
      Bits v;
      std::memcpy(&v, p + i * int64_t(sizeof(Bits)), sizeof(Bits));
      if ((v & exp) == exp) return i;
    }
  }
  return -1;
}

}  // namespace

void refuse_non_finite_weights(const Checkpoint& ck) {
  for (const auto& [name, t] : ck.tensors) {
    int64_t at = -1;
    switch (t.dtype) {
      case DType::F32: at = first_non_finite<uint32_t>(t.data, t.numel(), 0x7f800000u); break;
      case DType::F16: at = first_non_finite<uint16_t>(t.data, t.numel(), 0x7c00u); break;
      case DType::BF16: at = first_non_finite<uint16_t>(t.data, t.numel(), 0x7f80u); break;
      default: continue;
    }
    if (at < 0) continue;
    // Which non-finite value: all-ones exponent with a zero mantissa is an infinity, else a NaN.
    const auto* p = static_cast<const uint8_t*>(t.data);
    uint32_t bits = 0;
    std::memcpy(&bits, p + at * int64_t(dtype_size(t.dtype)), dtype_size(t.dtype));
    const int width = int(dtype_size(t.dtype)) * 8;
    const uint32_t sign = bits >> (width - 1) & 1u,
                   mantissa = bits & (t.dtype == DType::F32 ? 0x7fffffu : t.dtype == DType::F16 ? 0x3ffu : 0x7fu);
    LLM_THROW() << "checkpoint '" << ck.source_path << "': tensor '" << name << "' holds "
                << (mantissa ? "NaN" : sign ? "-inf" : "inf") << " at element " << at << " of " << t.numel()
                << "; a weight must be finite";
  }
}

}  // namespace llmctl
