#include "quant/format/gguf_group_affine.h"

#include <stdexcept>

#include "quant/format/gguf_blocks.h"
#include "quant/format/gguf_code_blocks.h"
#include "quant/format/half_float.h"

// The scales are the products gguf_blocks.cpp computes (d * sc, dmin * m), rounded the same way.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace llmctl::quant {

namespace {

// The offset of the formats without one: -0, not +0, because x + (-0) is x bit for bit (a -0
// product stays -0), so dequantize() reproduces the reference's signed zeros too.
constexpr float kNoOffset = -0.0f;

enum : uint32_t {
  kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14,
  kIQ4_NL = 20, kIQ4_XS = 23, kMXFP4 = 39, kTQ1_0 = 34, kTQ2_0 = 35
};

float f16_at(const uint8_t* p) { return half_bits_to_f32(uint16_t(p[0] | (p[1] << 8))); }

uint32_t u32_at(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

// Legacy 32-element blocks: low nibbles hold elements 0..15, high nibbles 16..31.
void nibbles32(const uint8_t* qs, uint8_t* codes) {
  for (int j = 0; j < 16; ++j) codes[j] = qs[j] & 0x0F, codes[16 + j] = qs[j] >> 4;
}

// A table format's 32 elements: the table's value of each code (int8), as the signed 8-bit code.
void table_codes(const uint8_t* qs, const int8_t* table, uint8_t* codes) {
  nibbles32(qs, codes);
  for (int j = 0; j < 32; ++j) codes[j] = uint8_t(table[codes[j]]);
}

// One block of `bs` elements: writes codes[0..bs) and its groups' scale/offset.
void convert_block(uint32_t type, const uint8_t* b, uint8_t* codes, float* scale, float* offset) {
  switch (type) {
    case kQ4_0: {
      const float d = f16_at(b);
      nibbles32(b + 2, codes);
      scale[0] = d, offset[0] = -8.0f * d;
      break;
    }
    case kQ4_1:
      nibbles32(b + 4, codes);
      scale[0] = f16_at(b), offset[0] = f16_at(b + 2);
      break;
    case kQ5_0: case kQ5_1: {
      const bool q51 = type == kQ5_1;
      const uint32_t qh = u32_at(b + (q51 ? 4 : 2));
      const uint8_t* qs = b + (q51 ? 8 : 6);
      nibbles32(qs, codes);
      for (int j = 0; j < 32; ++j) {
        const int q = codes[j] | int((qh >> j) & 1u) << 4;
        codes[j] = uint8_t(int8_t(q51 ? q : q - 16));
      }
      scale[0] = f16_at(b), offset[0] = q51 ? f16_at(b + 2) : kNoOffset;
      break;
    }
    case kQ8_0:
      for (int j = 0; j < 32; ++j) codes[j] = b[2 + j];
      scale[0] = f16_at(b), offset[0] = kNoOffset;
      break;
    case kQ4_K: case kQ5_K: {
      const bool q5 = type == kQ5_K;
      const float d = f16_at(b), dmin = f16_at(b + 2);
      const uint8_t* qh = b + 16;
      const uint8_t* qs = b + (q5 ? 48 : 16);
      for (int s = 0; s < 8; ++s) {  // 32-element sub-blocks; pairs share 32 bytes of qs
        uint8_t sc, mn;
        ggml_k_scale_min(b + 4, s, &sc, &mn);
        scale[s] = d * float(sc);
        offset[s] = -(dmin * float(mn));
        const uint8_t* q = qs + (s / 2) * 32;
        const int shift = 4 * (s % 2);
        for (int j = 0; j < 32; ++j) {
          int v = (q[j] >> shift) & 0x0F;
          if (q5) v |= ((qh[j] >> s) & 1) << 4;
          codes[s * 32 + j] = uint8_t(v);
        }
      }
      break;
    }
    // The table formats: each element is scale * table[code] (gguf_nonlinear_blocks.cpp), so the
    // table's int8 value is the code and the block's scale the group's, with no offset.
    case kIQ4_NL:
      table_codes(b + 2, kGgmlIq4Values, codes);
      scale[0] = f16_at(b), offset[0] = kNoOffset;
      break;
    case kIQ4_XS:
      for (int s = 0; s < 8; ++s) {
        table_codes(b + 8 + 16 * s, kGgmlIq4Values, codes + 32 * s);
        scale[s] = ggml_iq4_xs_scale(b, s), offset[s] = kNoOffset;
      }
      break;
    case kMXFP4:
      table_codes(b + 1, kGgmlE2m1Doubled, codes);
      scale[0] = ggml_e8m0_half(b[0]), offset[0] = kNoOffset;
      break;
    // Q2_K and Q3_K: 16 sub-blocks of 16; element i's 2 low bits are bits 2 (i % 128 / 32) of
    // qs[32 (i / 128) + i % 32] (gguf_blocks.cpp).
    case kQ2_K: {
      const uint8_t* qs = b + 16;
      const float d = f16_at(b + 80), dmin = f16_at(b + 82);
      for (int s = 0; s < 16; ++s) scale[s] = d * float(b[s] & 0x0F), offset[s] = -(dmin * float(b[s] >> 4));
      for (int g = 0; g < 2; ++g)  // element 128 g + 32 q + j (loops the compiler vectorizes)
        for (int q = 0; q < 4; ++q)
          for (int j = 0; j < 32; ++j) codes[128 * g + 32 * q + j] = uint8_t((qs[32 * g + j] >> (2 * q)) & 3);
      break;
    }
    case kQ3_K: {
      const uint8_t* hmask = b;
      const uint8_t* qs = b + 32;
      const uint8_t* sc = b + 96;
      const float d = f16_at(b + 108);
      for (int s = 0; s < 16; ++s) {
        const int lo = (sc[s % 8] >> (4 * (s / 8))) & 0x0F, hi = (sc[8 + s % 4] >> (2 * (s / 4))) & 0x03;
        scale[s] = d * float((lo | hi << 4) - 32), offset[s] = kNoOffset;
      }
      for (int g = 0; g < 2; ++g)  // element 128 g + 32 q + j
        for (int q = 0; q < 4; ++q)
          for (int j = 0; j < 32; ++j) {
            const int low = (qs[32 * g + j] >> (2 * q)) & 3;
            const int high = (hmask[j] >> (4 * g + q)) & 1;  // clear: the code is 4 lower
            codes[128 * g + 32 * q + j] = uint8_t(int8_t(low - ((high ^ 1) << 2)));
          }
      break;
    }
    case kQ6_K: {
      const uint8_t* ql = b;
      const uint8_t* qh = b + 128;
      const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
      const float d = f16_at(b + 208);
      for (int s = 0; s < 16; ++s) scale[s] = d * float(sc[s]), offset[s] = kNoOffset;
      for (int g = 0; g < 2; ++g)  // element 128 g + 32 q + j
        for (int q = 0; q < 4; ++q)
          for (int j = 0; j < 32; ++j) {
            const int lo = (ql[64 * g + 32 * (q % 2) + j] >> (4 * (q / 2))) & 0x0F;
            const int hi = (qh[32 * g + j] >> (2 * q)) & 0x03;
            codes[128 * g + 32 * q + j] = uint8_t(int8_t((lo | hi << 4) - 32));
          }
      break;
    }
    default: {  // the IQ grid and ternary formats: codes times a group's scale (gguf_code_blocks.h)
      int8_t c[256];
      ggml_code_block_decode(type, b, c, scale);
      // The ternary formats' codes q - 1 are stored as q (0..2; 3 in TQ2_0) under offset -d, so that the
      // loader keeps them in 2 bits: d q + (-d) is d (q - 1), exactly (3 d has at most 13 significant bits),
      // but for the sign of a zero (+0 where the reference gives -0 for a negative d, as in Q4_0).
      const bool ternary = type == kTQ1_0 || type == kTQ2_0;
      for (int i = 0; i < 256; ++i) codes[i] = uint8_t(ternary ? c[i] + 1 : c[i]);
      for (int g = 0; g < 256 / ggml_code_block_group(type); ++g) offset[g] = ternary ? -scale[g] : kNoOffset;
      break;
    }
  }
}

}  // namespace

bool gguf_group_affine_supported(uint32_t type) {
  switch (type) {
    case kQ4_0: case kQ4_1: case kQ5_0: case kQ5_1: case kQ8_0: case kQ2_K: case kQ3_K: case kQ4_K: case kQ5_K:
    case kQ6_K: case kIQ4_NL: case kIQ4_XS: case kMXFP4: return true;
  }
  return ggml_code_block_type(type);
}

void check_gguf_group_affine_shape(uint32_t type, size_t nbytes, int64_t n, int64_t k) {
  GgmlBlockLayout l;
  if (!gguf_group_affine_supported(type) || !ggml_block_layout(type, &l))
    throw std::invalid_argument(std::string("GGUF type ") + ggml_type_label(type) + " has no group-affine form");
  if (n <= 0 || k <= 0 || k % l.block_size != 0)
    throw std::invalid_argument(std::string(ggml_type_label(type)) + " tensor of shape [" + std::to_string(n) + ", " +
                                std::to_string(k) + "]: rows are not whole blocks of " +
                                std::to_string(l.block_size));
  const int64_t blocks = n * (k / l.block_size);
  if (nbytes != size_t(blocks) * l.type_size)
    throw std::invalid_argument(std::string(ggml_type_label(type)) + " tensor of shape [" + std::to_string(n) + ", " +
                                std::to_string(k) + "] has " + std::to_string(nbytes) + " bytes, expected " +
                                std::to_string(size_t(blocks) * l.type_size));
}

namespace {
int gguf_group_affine_bits(uint32_t type) {
  return (type == kQ4_0 || type == kQ4_1 || type == kQ2_K || type == kQ4_K) ? 4 : 8;
}
int gguf_group_affine_group(uint32_t type) {
  if (ggml_code_block_type(type)) return ggml_code_block_group(type);
  return (type == kQ2_K || type == kQ3_K || type == kQ6_K) ? 16 : 32;
}
}  // namespace

GroupAffineWeight gguf_group_affine_shell(uint32_t type, size_t nbytes, int64_t n, int64_t k) {
  check_gguf_group_affine_shape(type, nbytes, n, k);
  GroupAffineWeight w;
  w.bits = gguf_group_affine_bits(type);
  w.n = n;
  w.k = k;
  w.group = gguf_group_affine_group(type);
  w.codes.resize(size_t(n * k));
  w.scale.resize(size_t(n * w.groups()));
  w.offset.resize(w.scale.size());
  return w;
}

int64_t gguf_group_affine_blocks(uint32_t type, int64_t n, int64_t k) {
  GgmlBlockLayout l;
  if (!ggml_block_layout(type, &l)) throw std::invalid_argument(std::string("GGUF type ") + ggml_type_label(type) + " is unknown");
  return n * (k / l.block_size);
}

void gguf_group_affine_convert(uint32_t type, const uint8_t* data, int64_t b0, int64_t b1, GroupAffineWeight& w) {
  GgmlBlockLayout l;
  if (!gguf_group_affine_supported(type) || !ggml_block_layout(type, &l))
    throw std::invalid_argument(std::string("GGUF type ") + ggml_type_label(type) + " has no group-affine form");
  const int64_t blocks = w.n * (w.k / l.block_size);
  const bool shell = w.n > 0 && w.k > 0 && w.k % l.block_size == 0 && w.bits == gguf_group_affine_bits(type) &&
                     w.group == gguf_group_affine_group(type) && w.codes.size() == size_t(w.n * w.k) &&
                     w.scale.size() == size_t(w.n * w.groups()) && w.offset.size() == w.scale.size();
  if (!shell)  // written into only as gguf_group_affine_shell made it for this type
    throw std::invalid_argument(std::string("a group-affine weight that is not a ") + ggml_type_label(type) +
                                " shell of its shape");
  if (b0 < 0 || b1 < b0 || b1 > blocks)
    throw std::invalid_argument("GGUF blocks [" + std::to_string(b0) + ", " + std::to_string(b1) + ") of a weight of " +
                                std::to_string(blocks));
  // Rows are whole blocks, so block b covers elements [b * bs, (b + 1) * bs) of the flat [N, K].
  const int64_t groups_per_block = l.block_size / w.group;
  for (int64_t b = b0; b < b1; ++b)
    convert_block(type, data + size_t(b) * l.type_size, &w.codes[size_t(b * l.block_size)],
                  &w.scale[size_t(b * groups_per_block)], &w.offset[size_t(b * groups_per_block)]);
}

std::optional<GroupAffineWeight> group_affine_from_gguf(uint32_t type, const uint8_t* data, size_t nbytes, int64_t n,
                                                        int64_t k, std::string* why_not) {
  if (!gguf_group_affine_supported(type)) {
    if (why_not) *why_not = std::string("GGUF type ") + ggml_type_label(type) + " has no group-affine form";
    return std::nullopt;
  }
  GroupAffineWeight w = gguf_group_affine_shell(type, nbytes, n, k);
  gguf_group_affine_convert(type, data, 0, gguf_group_affine_blocks(type, n, k), w);
  return w;
}

}  // namespace llmctl::quant
