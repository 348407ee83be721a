#include "quant/format/gguf_code_blocks.h"

#include "quant/format/gguf_blocks.h"
#include "quant/format/half_float.h"

// The scales are the products gguf.quants computes, rounded the same way (no fused multiply-adds).
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace llmctl::quant {

namespace {

#include "gguf_iq_grids.inc"  // kGridIQ2_XXS ... kGridIQ1_S, kGridKsigns (generated)

enum : uint32_t {
  kIQ2_XXS = 16, kIQ2_XS = 17, kIQ3_XXS = 18, kIQ1_S = 19, kIQ3_S = 21, kIQ2_S = 22, kIQ1_M = 29, kTQ1_0 = 34,
  kTQ2_0 = 35
};

float f16_at(const uint8_t* p) { return half_bits_to_f32(uint16_t(p[0] | (p[1] << 8))); }
uint32_t u16_at(const uint8_t* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8; }
uint32_t u32_at(const uint8_t* p) { return u16_at(p) | u16_at(p + 2) << 16; }

// n values of a grid entry, each negated where its bit of `signs` is set.
void signed_entry(const int8_t* entry, int n, uint32_t signs, int8_t* codes) {
  for (int j = 0; j < n; ++j) codes[j] = int8_t((signs >> j) & 1 ? -entry[j] : entry[j]);
}

// IQ2's and IQ3_XXS's sub-block scale: d * (0.5 + s) * quarter_or_half, as gguf.quants rounds it.
float half_step_scale(float d, uint32_t s, float factor) { return d * (0.5f + float(s)) * factor; }

// IQ1: 8 values of an entry of the {-1, 0, 1} grid plus delta (+-1/8), in eighths: 8 g +- 1.
void iq1_entry(uint32_t index, bool minus, int8_t* codes) {
  const int8_t* g = kGridIQ1_S + 8 * (index & 2047);
  for (int j = 0; j < 8; ++j) codes[j] = int8_t(8 * g[j] + (minus ? -1 : 1));
}

void iq2_xxs(const uint8_t* b, int8_t* codes, float* scales) {
  const float d = f16_at(b);
  for (int ib = 0; ib < 8; ++ib) {  // 32 elements: 4 grid indices (bytes), then 4 x 7 sign bits + 4 scale bits
    const uint8_t* q = b + 2 + 8 * ib;
    const uint32_t aux = u32_at(q + 4);
    scales[ib] = half_step_scale(d, aux >> 28, 0.25f);
    for (int l = 0; l < 4; ++l)
      signed_entry(kGridIQ2_XXS + 8 * q[l], 8, kGridKsigns[(aux >> (7 * l)) & 127], codes + 32 * ib + 8 * l);
  }
}

void iq2_xs(const uint8_t* b, int8_t* codes, float* scales) {
  const float d = f16_at(b);
  const uint8_t* sc = b + 66;
  for (int g = 0; g < 16; ++g) scales[g] = half_step_scale(d, (sc[g / 2] >> (4 * (g % 2))) & 15, 0.25f);
  for (int i = 0; i < 32; ++i) {  // 8 elements: 9 bits of grid index, 7 sign bits
    const uint32_t v = u16_at(b + 2 + 2 * i);
    signed_entry(kGridIQ2_XS + 8 * (v & 511), 8, kGridKsigns[v >> 9], codes + 8 * i);
  }
}

void iq2_s(const uint8_t* b, int8_t* codes, float* scales) {
  const float d = f16_at(b);
  const uint8_t *qs = b + 2, *signs = b + 34, *qh = b + 66, *sc = b + 74;
  for (int g = 0; g < 16; ++g) scales[g] = half_step_scale(d, (sc[g / 2] >> (4 * (g % 2))) & 15, 0.25f);
  for (int i = 0; i < 32; ++i) {  // 8 elements: 8 + 2 bits of grid index, a byte of signs
    const uint32_t index = qs[i] | ((qh[i / 4] >> (2 * (i % 4))) & 3u) << 8;
    signed_entry(kGridIQ2_S + 8 * index, 8, signs[i], codes + 8 * i);
  }
}

void iq3_xxs(const uint8_t* b, int8_t* codes, float* scales) {
  const float d = f16_at(b);
  const uint8_t* qs = b + 2;
  for (int ib = 0; ib < 8; ++ib) {  // 32 elements: 8 grid indices of 4 values, 4 x 7 sign bits + 4 scale bits
    const uint32_t aux = u32_at(b + 66 + 4 * ib);
    scales[ib] = half_step_scale(d, aux >> 28, 0.5f);
    for (int l = 0; l < 4; ++l) {
      int8_t entry[8];
      for (int h = 0; h < 2; ++h)
        for (int j = 0; j < 4; ++j) entry[4 * h + j] = kGridIQ3_XXS[4 * qs[8 * ib + 2 * l + h] + j];
      signed_entry(entry, 8, kGridKsigns[(aux >> (7 * l)) & 127], codes + 32 * ib + 8 * l);
    }
  }
}

void iq3_s(const uint8_t* b, int8_t* codes, float* scales) {
  const float d = f16_at(b);
  const uint8_t *qs = b + 2, *qh = b + 66, *signs = b + 74, *sc = b + 106;
  for (int ib = 0; ib < 8; ++ib) scales[ib] = d * float(1 + 2 * int((sc[ib / 2] >> (4 * (ib % 2))) & 15));
  for (int i = 0; i < 64; ++i) {  // 4 elements: 8 + 1 bits of grid index
    const uint32_t index = qs[i] | ((qh[i / 8] >> (i % 8)) & 1u) << 8;
    signed_entry(kGridIQ3_S + 4 * index, 4, signs[i / 2] >> (4 * (i % 2)), codes + 4 * i);
  }
}

void iq1_s(const uint8_t* b, int8_t* codes, float* scales) {
  const float d = f16_at(b);
  const uint8_t* qs = b + 2;
  for (int ib = 0; ib < 8; ++ib) {  // 32 elements: qh holds 4 x 3 high index bits, 3 scale bits, delta's sign
    const uint32_t h = u16_at(b + 34 + 2 * ib);
    scales[ib] = d * float(2 * ((h >> 12) & 7) + 1) * 0.125f;
    for (int l = 0; l < 4; ++l)
      iq1_entry(qs[4 * ib + l] | ((h >> (3 * l)) & 7) << 8, h & 0x8000, codes + 32 * ib + 8 * l);
  }
}

void iq1_m(const uint8_t* b, int8_t* codes, float* scales) {
  const uint8_t *qs = b, *qh = b + 32;
  uint32_t sc[4];
  for (int i = 0; i < 4; ++i) sc[i] = u16_at(b + 48 + 2 * i);
  // the block's f16 scale is the top nibbles of the four 16-bit scale words
  const float d = half_bits_to_f32(
      uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000)));
  for (int g = 0; g < 16; ++g) scales[g] = d * float(2 * ((sc[g / 4] >> (3 * (g % 4))) & 7) + 1) * 0.125f;
  for (int i = 0; i < 32; ++i) {  // 8 elements: a nibble of qh holds 3 high index bits and delta's sign
    const uint32_t nib = (qh[i / 2] >> (4 * (i % 2))) & 15;
    iq1_entry(qs[i] | (nib & 7) << 8, nib & 8, codes + 8 * i);
  }
}

// TQ1_0: 5 (or 4) base-3 digits a byte, read as ((uint8)(byte * 3^n) * 3) >> 8.
void tq1_0(const uint8_t* b, int8_t* codes, float* scales) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  auto digit = [](uint8_t byte, int n) { return int8_t(((uint32_t(uint8_t(byte * kPow3[n])) * 3) >> 8) - 1); };
  const uint8_t *qs = b, *qh = b + 48;
  for (int n = 0; n < 5; ++n)
    for (int m = 0; m < 32; ++m) codes[32 * n + m] = digit(qs[m], n);
  for (int n = 0; n < 5; ++n)
    for (int m = 0; m < 16; ++m) codes[160 + 16 * n + m] = digit(qs[32 + m], n);
  for (int n = 0; n < 4; ++n)
    for (int m = 0; m < 4; ++m) codes[240 + 4 * n + m] = digit(qh[m], n);
  for (int g = 0; g < 8; ++g) scales[g] = f16_at(b + 52);
}

// TQ2_0: 2-bit q, element 128 j + 32 l + m in bits 2 l of byte 32 j + m.
void tq2_0(const uint8_t* b, int8_t* codes, float* scales) {
  for (int j = 0; j < 2; ++j)
    for (int l = 0; l < 4; ++l)
      for (int m = 0; m < 32; ++m) codes[128 * j + 32 * l + m] = int8_t(((b[32 * j + m] >> (2 * l)) & 3) - 1);
  for (int g = 0; g < 8; ++g) scales[g] = f16_at(b + 64);
}

}  // namespace

bool ggml_code_block_type(uint32_t type) { return ggml_code_block_group(type) != 0; }

int ggml_code_block_group(uint32_t type) {
  switch (type) {
    case kIQ2_XS: case kIQ2_S: case kIQ1_M: return 16;
    case kIQ2_XXS: case kIQ3_XXS: case kIQ3_S: case kIQ1_S: case kTQ1_0: case kTQ2_0: return 32;
  }
  return 0;
}

void ggml_code_block_decode(uint32_t type, const uint8_t* b, int8_t* codes, float* scales) {
  switch (type) {
    case kIQ2_XXS: return iq2_xxs(b, codes, scales);
    case kIQ2_XS: return iq2_xs(b, codes, scales);
    case kIQ2_S: return iq2_s(b, codes, scales);
    case kIQ3_XXS: return iq3_xxs(b, codes, scales);
    case kIQ3_S: return iq3_s(b, codes, scales);
    case kIQ1_S: return iq1_s(b, codes, scales);
    case kIQ1_M: return iq1_m(b, codes, scales);
    case kTQ1_0: return tq1_0(b, codes, scales);
    case kTQ2_0: return tq2_0(b, codes, scales);
  }
}

void dequantize_code_blocks(uint32_t type, const uint8_t* src, float* dst, int64_t nb) {
  const int group = ggml_code_block_group(type);
  if (group == 0) return;
  GgmlBlockLayout l;
  if (!ggml_block_layout(type, &l)) return;
  int8_t codes[256];
  float scales[16];
  for (int64_t b = 0; b < nb; ++b, src += l.type_size, dst += 256) {
    ggml_code_block_decode(type, src, codes, scales);
    for (int i = 0; i < 256; ++i) dst[i] = scales[i / group] * float(codes[i]);
  }
}

}  // namespace llmctl::quant
