#include "quant/format/gguf_blocks.h"

#include <cmath>
#include <cstring>
#include <initializer_list>

#include "quant/format/gguf_code_blocks.h"

// Bit-exactness with the numpy reference needs each multiply and add rounded on its own: no FMA.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace llmctl::quant {

namespace {

constexpr int64_t QK = 32;     // elements per block of the legacy formats
constexpr int64_t QK_K = 256;  // elements per super-block of the K-quants

float half_to_float(const uint8_t* p) {
  uint16_t h = uint16_t(p[0] | (p[1] << 8));
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 31) {  // inf / NaN: keep the payload as numpy's astype does
    uint32_t u = sign | 0x7f800000u | (man << 13);
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  // Every f16 value is exact in f32, so ldexp of the integer significand is exact.
  float mag = exp == 0 ? std::ldexp(float(man), -24) : std::ldexp(float(man | 0x400u), int(exp) - 25);
  return sign ? -mag : mag;
}

uint32_t load_u32le(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

// Legacy 32-element blocks: low nibbles hold elements 0..15, high nibbles 16..31.
int nibble32(const uint8_t* qs, int j) { return j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4); }

}  // namespace

// The 12 packed bytes of 6-bit scales and mins shared by Q4_K and Q5_K.
void ggml_k_scale_min(const uint8_t* s, int i, uint8_t* sc, uint8_t* mn) {
  if (i < 4) {
    *sc = s[i] & 0x3F;
    *mn = s[i + 4] & 0x3F;
  } else {
    *sc = uint8_t((s[i + 4] & 0x0F) | ((s[i - 4] >> 2) & 0x30));
    *mn = uint8_t((s[i + 4] >> 4) | ((s[i] >> 2) & 0x30));
  }
}

bool ggml_block_layout(uint32_t type, GgmlBlockLayout* out) {
  GgmlBlockLayout l;
  switch (type) {
    case 0: l = {1, 4}; break;                          // F32
    case 1: l = {1, 2}; break;                          // F16
    case 2: l = {QK, 2 + 16}; break;                    // Q4_0
    case 3: l = {QK, 2 + 2 + 16}; break;                // Q4_1
    case 6: l = {QK, 2 + 4 + 16}; break;                // Q5_0
    case 7: l = {QK, 2 + 2 + 4 + 16}; break;            // Q5_1
    case 8: l = {QK, 2 + 32}; break;                    // Q8_0
    case 9: l = {QK, 4 + 4 + 32}; break;                // Q8_1
    case 10: l = {QK_K, 2 + 2 + 16 + 64}; break;        // Q2_K
    case 11: l = {QK_K, 2 + 64 + 32 + 12}; break;       // Q3_K
    case 12: l = {QK_K, 2 + 2 + 128 + 12}; break;       // Q4_K
    case 13: l = {QK_K, 2 + 2 + 128 + 32 + 12}; break;  // Q5_K
    case 14: l = {QK_K, 2 + 128 + 64 + 16}; break;      // Q6_K
    case 15: l = {QK_K, 4 + 256 + 32}; break;           // Q8_K
    case 16: l = {QK_K, 2 + 64}; break;                 // IQ2_XXS
    case 17: l = {QK_K, 2 + 64 + 8}; break;             // IQ2_XS
    case 18: l = {QK_K, 2 + 64 + 32}; break;            // IQ3_XXS
    case 19: l = {QK_K, 2 + 32 + 16}; break;            // IQ1_S
    case 20: l = {QK, 2 + 16}; break;                   // IQ4_NL
    case 21: l = {QK_K, 2 + 64 + 32 + 8 + 4}; break;    // IQ3_S
    case 22: l = {QK_K, 2 + 64 + 16}; break;            // IQ2_S
    case 23: l = {QK_K, 2 + 2 + 128 + 4}; break;        // IQ4_XS
    case 24: l = {1, 1}; break;                         // I8
    case 25: l = {1, 2}; break;                         // I16
    case 26: l = {1, 4}; break;                         // I32
    case 27: l = {1, 8}; break;                         // I64
    case 28: l = {1, 8}; break;                         // F64
    case 29: l = {QK_K, 32 + 16 + 8}; break;            // IQ1_M
    case 30: l = {1, 2}; break;                         // BF16
    case 34: l = {QK_K, 2 + 52}; break;                 // TQ1_0
    case 35: l = {QK_K, 2 + 64}; break;                 // TQ2_0
    case 39: l = {QK, 1 + 16}; break;                   // MXFP4
    default: return false;
  }
  *out = l;
  return true;
}

const char* ggml_type_label(uint32_t type) {
  switch (type) {
    case 0: return "F32";
    case 1: return "F16";
    case 2: return "Q4_0";
    case 3: return "Q4_1";
    case 6: return "Q5_0";
    case 7: return "Q5_1";
    case 8: return "Q8_0";
    case 9: return "Q8_1";
    case 10: return "Q2_K";
    case 11: return "Q3_K";
    case 12: return "Q4_K";
    case 13: return "Q5_K";
    case 14: return "Q6_K";
    case 15: return "Q8_K";
    case 16: return "IQ2_XXS";
    case 17: return "IQ2_XS";
    case 18: return "IQ3_XXS";
    case 19: return "IQ1_S";
    case 20: return "IQ4_NL";
    case 21: return "IQ3_S";
    case 22: return "IQ2_S";
    case 23: return "IQ4_XS";
    case 24: return "I8";
    case 25: return "I16";
    case 26: return "I32";
    case 27: return "I64";
    case 28: return "F64";
    case 29: return "IQ1_M";
    case 30: return "BF16";
    case 34: return "TQ1_0";
    case 35: return "TQ2_0";
    case 39: return "MXFP4";
  }
  return "unknown";
}

bool ggml_can_dequantize(uint32_t type) {
  for (uint32_t t : {2u, 3u, 6u, 7u, 8u, 10u, 11u, 12u, 13u, 14u, 20u, 23u, 39u})
    if (t == type) return true;
  return ggml_code_block_type(type);  // the IQ grid and ternary formats (gguf_code_blocks.h)
}

void dequantize_q4_0(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 18, dst += QK) {
    float d = half_to_float(src);
    for (int j = 0; j < QK; ++j) dst[j] = d * float(nibble32(src + 2, j) - 8);
  }
}

void dequantize_q4_1(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 20, dst += QK) {
    float d = half_to_float(src), m = half_to_float(src + 2);
    for (int j = 0; j < QK; ++j) dst[j] = d * float(nibble32(src + 4, j)) + m;
  }
}

void dequantize_q5_0(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 22, dst += QK) {
    float d = half_to_float(src);
    uint32_t qh = load_u32le(src + 2);
    for (int j = 0; j < QK; ++j) {
      int q = nibble32(src + 6, j) | int((qh >> j) & 1u) << 4;
      dst[j] = d * float(q - 16);
    }
  }
}

void dequantize_q5_1(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 24, dst += QK) {
    float d = half_to_float(src), m = half_to_float(src + 2);
    uint32_t qh = load_u32le(src + 4);
    for (int j = 0; j < QK; ++j) {
      int q = nibble32(src + 8, j) | int((qh >> j) & 1u) << 4;
      dst[j] = d * float(q) + m;
    }
  }
}

void dequantize_q8_0(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 34, dst += QK) {
    float d = half_to_float(src);
    for (int j = 0; j < QK; ++j) dst[j] = float(int8_t(src[2 + j])) * d;
  }
}

// Q2_K: scales[16] (low nibble scale, high nibble min), qs[64] (2 bits), d, dmin.
void dequantize_q2_k(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 84, dst += QK_K) {
    const uint8_t* scales = src;
    const uint8_t* qs = src + 16;
    float d = half_to_float(src + 80), dmin = half_to_float(src + 82);
    for (int i = 0; i < QK_K; ++i) {
      // element i: 128-element half g, shift group s, byte j
      int g = i / 128, s = (i % 128) / 32, j = i % 32;
      int q = (qs[g * 32 + j] >> (2 * s)) & 3;
      int sub = i / 16;
      float dl = d * float(scales[sub] & 0x0F);
      float ml = dmin * float(scales[sub] >> 4);
      dst[i] = dl * float(q) - ml;
    }
  }
}

// Q3_K: hmask[32], qs[64] (2 low bits), scales[12] (16 6-bit scales), d.
void dequantize_q3_k(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 110, dst += QK_K) {
    const uint8_t* hmask = src;
    const uint8_t* qs = src + 32;
    const uint8_t* sc = src + 96;
    float d = half_to_float(src + 108);
    float dl[16];
    for (int k = 0; k < 16; ++k) {
      int lo = (sc[k % 8] >> (4 * (k / 8))) & 0x0F;
      int hi = (sc[8 + k % 4] >> (2 * (k / 4))) & 0x03;
      dl[k] = d * float((lo | hi << 4) - 32);
    }
    for (int i = 0; i < QK_K; ++i) {
      int g = i / 128, s = (i % 128) / 32, j = i % 32;
      int ql = (qs[g * 32 + j] >> (2 * s)) & 3;
      int hbit = (hmask[j] >> (i / 32)) & 1;
      int q = ql - ((hbit ^ 1) << 2);  // the offset of 4 applies when the mask bit is clear
      dst[i] = dl[i / 16] * float(q);
    }
  }
}

// Q4_K: d, dmin, scales[12] (8 6-bit scale/min pairs), qs[128] (4 bits).
void dequantize_q4_k(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 144, dst += QK_K) {
    float d = half_to_float(src), dmin = half_to_float(src + 2);
    const uint8_t* qs = src + 16;
    for (int k = 0; k < 8; ++k) {  // 32-element sub-blocks; pairs share 32 bytes of qs
      uint8_t sc, mn;
      ggml_k_scale_min(src + 4, k, &sc, &mn);
      float ds = d * float(sc), dm = dmin * float(mn);
      const uint8_t* q = qs + (k / 2) * 32;
      int shift = 4 * (k % 2);
      for (int j = 0; j < 32; ++j) dst[k * 32 + j] = ds * float((q[j] >> shift) & 0x0F) - dm;
    }
  }
}

// Q5_K: as Q4_K plus qh[32] holding the fifth bit (bit k for sub-block k).
void dequantize_q5_k(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 176, dst += QK_K) {
    float d = half_to_float(src), dmin = half_to_float(src + 2);
    const uint8_t* qh = src + 16;
    const uint8_t* qs = src + 48;
    for (int k = 0; k < 8; ++k) {
      uint8_t sc, mn;
      ggml_k_scale_min(src + 4, k, &sc, &mn);
      float ds = d * float(sc), dm = dmin * float(mn);
      const uint8_t* q = qs + (k / 2) * 32;
      int shift = 4 * (k % 2);
      for (int j = 0; j < 32; ++j) {
        int v = ((q[j] >> shift) & 0x0F) | ((qh[j] >> k) & 1) << 4;
        dst[k * 32 + j] = ds * float(v) - dm;
      }
    }
  }
}

// Q6_K: ql[128] (low 4 bits), qh[64] (high 2 bits), scales[16] (int8), d.
void dequantize_q6_k(const uint8_t* src, float* dst, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, src += 210, dst += QK_K) {
    const uint8_t* ql = src;
    const uint8_t* qh = src + 128;
    const int8_t* scales = reinterpret_cast<const int8_t*>(src + 192);
    float d = half_to_float(src + 208);
    for (int i = 0; i < QK_K; ++i) {
      int g = i / 128, r = i % 128;
      int lo = (ql[g * 64 + r % 64] >> (4 * (r / 64))) & 0x0F;
      int hi = (qh[g * 32 + r % 32] >> (2 * (r / 32))) & 0x03;
      float ds = d * float(scales[i / 16]);
      dst[i] = ds * float((lo | hi << 4) - 32);
    }
  }
}

bool dequantize_row(uint32_t type, const void* src, float* dst, int64_t n) {
  GgmlBlockLayout l;
  if (!ggml_can_dequantize(type) || !ggml_block_layout(type, &l) || n < 0 || n % l.block_size != 0) return false;
  const auto* s = static_cast<const uint8_t*>(src);
  int64_t nb = n / l.block_size;
  switch (type) {
    case 2: dequantize_q4_0(s, dst, nb); break;
    case 3: dequantize_q4_1(s, dst, nb); break;
    case 6: dequantize_q5_0(s, dst, nb); break;
    case 7: dequantize_q5_1(s, dst, nb); break;
    case 8: dequantize_q8_0(s, dst, nb); break;
    case 10: dequantize_q2_k(s, dst, nb); break;
    case 11: dequantize_q3_k(s, dst, nb); break;
    case 12: dequantize_q4_k(s, dst, nb); break;
    case 13: dequantize_q5_k(s, dst, nb); break;
    case 14: dequantize_q6_k(s, dst, nb); break;
    case 20: dequantize_iq4_nl(s, dst, nb); break;
    case 23: dequantize_iq4_xs(s, dst, nb); break;
    case 39: dequantize_mxfp4(s, dst, nb); break;
    default: dequantize_code_blocks(type, s, dst, nb); break;
  }
  return true;
}

}  // namespace llmctl::quant
