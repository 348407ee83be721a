// Codebooks (qlinear.h): 8-bit codes that take at most 16 values, as 4-bit positions in a table;
// and narrow codes, all within 63 (15) of their least.
#include <array>
#include <cstring>

#include "kernels/cpu/qlinear.h"

namespace llmctl::kernels {

bool qweight_codebook(int64_t count, const uint8_t* codes, int8_t* table, uint8_t* index) {
  if (count <= 0) return false;
  std::array<bool, 256> seen{};  // by int8 value + 128
  int distinct = 0;
  for (int64_t i = 0; i < count; ++i) {
    const int v = int(int8_t(codes[i])) + 128;
    if (!seen[size_t(v)]) {
      seen[size_t(v)] = true;
      if (++distinct > 16) return false;
    }
  }
  std::array<uint8_t, 256> pos{};
  int n = 0;
  for (int v = 0; v < 256; ++v)
    if (seen[size_t(v)]) {
      pos[size_t(v)] = uint8_t(n);
      table[n++] = int8_t(v - 128);
    }
  for (int j = n; j < 16; ++j) table[j] = table[n - 1];
  for (int64_t i = 0; index && i < count; ++i) index[i] = pos[size_t(int(int8_t(codes[i])) + 128)];
  return true;
}

CodeRange qweight_code_range(int64_t count, const uint8_t* codes) {
  CodeRange r{127, -128};
  for (int64_t i = 0; i < count; ++i) {
    const int v = int8_t(codes[i]);
    r.lo = v < r.lo ? v : r.lo, r.hi = v > r.hi ? v : r.hi;
  }
  return r;
}

bool qweight_compact_codes_ok(QLayout layout) { return layout == QLayout::RowLane16; }

}  // namespace llmctl::kernels
