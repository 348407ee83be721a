// The GGML block formats whose 4-bit codes index a table of values instead of an affine grid:
// IQ4_NL, IQ4_XS (its 256-element super-blocks with 6-bit sub-block scales) and MXFP4 (e2m1 codes,
// a power-of-two e8m0 scale). Dequantization as gguf.quants does it (gguf_blocks.h), bit for bit.
#include <cstring>

#include "quant/format/gguf_blocks.h"
#include "quant/format/half_float.h"

namespace llmctl::quant {

// IQ4_NL's and IQ4_XS's values of the 16 codes.
const int8_t kGgmlIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
// MXFP4's e2m1 values, doubled (the scale below is halved to match).
const int8_t kGgmlE2m1Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// Half of 2^(e - 127), exactly (subnormal for e < 2).
float ggml_e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? uint32_t(0x00200000u) << e : uint32_t(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

namespace {

float half_at(const uint8_t* p) { return half_bits_to_f32(uint16_t(p[0] | (p[1] << 8))); }

// 32 values from 16 bytes of codes: low nibbles are elements 0..15, high nibbles 16..31.
void table_block(const uint8_t* qs, float scale, const int8_t* table, float* dst) {
  for (int j = 0; j < 16; ++j) {
    dst[j] = scale * float(table[qs[j] & 0x0F]);
    dst[j + 16] = scale * float(table[qs[j] >> 4]);
  }
}

}  // namespace

// IQ4_NL: d (f16), qs[16].
void dequantize_iq4_nl(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 18, dst += 32) table_block(src + 2, half_at(src), kGgmlIq4Values, dst);
}

float ggml_iq4_xs_scale(const uint8_t* block, int ib) {
  const uint32_t scales_h = uint32_t(block[2] | (block[3] << 8));
  const int low = (block[4 + ib / 2] >> (4 * (ib % 2))) & 0x0F;
  const int high = (scales_h >> (2 * ib)) & 0x03;
  return half_at(block) * float((low | (high << 4)) - 32);
}

// IQ4_XS: d (f16), scales_h (u16: 2 high bits per sub-block), scales_l[4] (4 low bits per
// sub-block), qs[128]; sub-block ib's scale is d * (6-bit value - 32).
void dequantize_iq4_xs(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 136, dst += 256)
    for (int ib = 0; ib < 8; ++ib) table_block(src + 8 + 16 * ib, ggml_iq4_xs_scale(src, ib), kGgmlIq4Values, dst + 32 * ib);
}

// MXFP4: e (e8m0), qs[16].
void dequantize_mxfp4(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 17, dst += 32) table_block(src + 1, ggml_e8m0_half(src[0]), kGgmlE2m1Doubled, dst);
}

}  // namespace llmctl::quant
