// Random GGUF blocks for the unit tests (conversion, packing): every GGML type the loader converts.
#pragma once
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "quant/format/gguf_blocks.h"
#include "quant/format/half_float.h"

namespace llmctl::qtest {

// IQ1_M's block scale h (f16 bits): its nibble w is the top nibble of the 16-bit word w at bytes 48..55.
inline void put_iq1m_scale(uint8_t* block, uint16_t h) {
  for (int w = 0; w < 4; ++w) {
    uint8_t& top = block[49 + 2 * w];
    top = uint8_t((top & 0x0F) | (((h >> (4 * w)) & 0x0F) << 4));
  }
}

// Random blocks of a GGML type: random bytes, with every f16 field a random half below 1 in
// magnitude (normal or subnormal; real blocks' scales are ~1e-3, and GroupAffineWeight::validate
// refuses scales that could make weights over 65504: inf/NaN and huge ones are excluded here).
inline std::vector<uint8_t> random_blocks(uint32_t type, int64_t blocks, std::mt19937& rng) {
  quant::GgmlBlockLayout l;
  REQUIRE(quant::ggml_block_layout(type, &l));
  std::vector<uint8_t> b(size_t(blocks) * l.type_size);
  for (uint8_t& x : b) x = uint8_t(rng());
  std::vector<size_t> halves;
  switch (type) {
    case 2: case 6: case 8: case 20: case 23: halves = {0}; break;
    case 3: case 7: case 12: case 13: halves = {0, 2}; break;
    case 10: halves = {80, 82}; break;
    case 11: halves = {108}; break;
    case 14: halves = {208}; break;
    case 16: case 17: case 18: case 19: case 21: case 22: halves = {0}; break;  // IQ2_*, IQ3_*, IQ1_S
    case 34: halves = {52}; break;                                              // TQ1_0
    case 35: halves = {64}; break;                                              // TQ2_0
  }
  if (type == 39)  // MXFP4: e8m0 scales from subnormal (0, 1) to 2^13, not past f16's range
    for (int64_t i = 0; i < blocks; ++i) b[size_t(i) * l.type_size] = uint8_t(i % 3 == 0 ? i % 2 : 100 + rng() % 40);
  if (type == 29)  // IQ1_M: its f16 scale split over four words
    for (int64_t i = 0; i < blocks; ++i)
      put_iq1m_scale(&b[size_t(i) * l.type_size], quant::f32_to_half_bits(float(int(rng() % 2001) - 1000) / 1024.0f));
  for (int64_t i = 0; i < blocks; ++i)
    for (size_t off : halves) {
      uint16_t h;
      do h = uint16_t(rng()); while (((h >> 10) & 0x1f) >= 15);  // exponent 15: |h| >= 1
      if (rng() % 4 == 0) h = quant::f32_to_half_bits(float(int(rng() % 2001) - 1000) / 1024.0f);  // typical sizes
      b[size_t(i) * l.type_size + off] = uint8_t(h), b[size_t(i) * l.type_size + off + 1] = uint8_t(h >> 8);
    }
  return b;
}

}  // namespace llmctl::qtest
