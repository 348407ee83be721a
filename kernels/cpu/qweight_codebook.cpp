// Codebooks (qlinear.h): 8-bit codes that take at most 16 values, as 4-bit positions in a table;
// and narrow codes, all within 63 (15) of their least.
#include <algorithm>
#include <array>
#include <cstring>

#include "kernels/cpu/qlinear.h"

namespace llmctl::kernels {

bool qweight_codebook(int64_t count, const uint8_t* codes, int8_t* table, uint8_t* index) {
  if (count <= 0) return false;
  std::array<uint8_t, 256> seen{};  // by int8 value + 128
  // marked without a branch, a chunk at a time; more than 16 values stop the scan at the chunk's end
  constexpr int64_t kChunk = 4096;
  for (int64_t c0 = 0; c0 < count; c0 += kChunk) {
    const int64_t c1 = c0 + kChunk < count ? c0 + kChunk : count;
    for (int64_t i = c0; i < c1; ++i) seen[size_t(codes[i] ^ 0x80)] = 1;  // int8 value + 128
    int distinct = 0;
    for (uint8_t s : seen) distinct += s;
    if (distinct > 16) return false;
  }
  int n = 0;
  for (int v = 0; v < 256; ++v)
    if (seen[size_t(v)]) table[n++] = int8_t(v - 128);
  for (int j = n; j < 16; ++j) table[j] = table[n - 1];
  return !index || qweight_codebook_positions(count, codes, table, index);
}

bool qweight_codebook_positions(int64_t count, const uint8_t* codes, const int8_t* table, uint8_t* index) {
  std::array<uint8_t, 256> pos;  // by stored byte; 0xFF: not in the table
  pos.fill(0xFF);
  for (int j = 15; j >= 0; --j) pos[size_t(uint8_t(table[j]))] = uint8_t(j);  // a repeated last: its first place
  uint8_t missing = 0;
  for (int64_t i = 0; i < count; ++i) {
    index[i] = pos[codes[i]];
    missing |= uint8_t(index[i] == 0xFF);
  }
  return missing == 0;
}

CodeRange qweight_code_range(int64_t count, const uint8_t* codes) {
  // the codes + 128 as unsigned bytes: their least and greatest 16 a vector (SSE2's pminub / pmaxub;
  // signed bytes went 4 a vector, widened to int32), and this runs over every code of a model at load
  uint8_t lo = 255, hi = 0;
  for (int64_t i = 0; i < count; ++i) {
    const uint8_t u = codes[i] ^ 0x80;
    lo = std::min(lo, u), hi = std::max(hi, u);
  }
  return CodeRange{int(lo) - 128, int(hi) - 128};  // none: {127, -128}
}

bool qweight_compact_codes_ok(QLayout layout) { return layout == QLayout::RowLane16; }

}  // namespace llmctl::kernels
