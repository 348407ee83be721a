// GGML block formats as stored in GGUF files: the size table and dequantization to f32.
// No engine dependency: types are the raw GGML type ids (numbering as in the GGUF spec).
// Results are bit-exact with the Python `gguf` package (gguf.quants.dequantize).
#pragma once
#include <cstddef>
#include <cstdint>

namespace llmctl::quant {

// Elements per block and bytes per block of a GGML type.
struct GgmlBlockLayout {
  int64_t block_size = 0;  // elements
  size_t type_size = 0;    // bytes
};

// False for a type id this table does not know (the reader then refuses the file).
bool ggml_block_layout(uint32_t type, GgmlBlockLayout* out);
// Name of a type id ("Q4_K"), or "unknown".
const char* ggml_type_label(uint32_t type);
// True for the block formats dequantize_row handles (not the plain float types).
bool ggml_can_dequantize(uint32_t type);

// Dequantizes n elements (a multiple of the block size) stored as blocks of `type` at src.
// Returns false when the type is not supported (see ggml_can_dequantize) or n is not a multiple
// of the block size; dst is untouched then.
bool dequantize_row(uint32_t type, const void* src, float* dst, int64_t n);

// Q4_K / Q5_K: the 6-bit scale and min of 32-element sub-block i (0..7) from the 12 packed bytes
// at `scales` (also used by gguf_group_affine.cpp, which must decode them the same way).
void ggml_k_scale_min(const uint8_t* scales, int i, uint8_t* sc, uint8_t* mn);

// One function per format; nb = number of blocks.
void dequantize_q4_0(const uint8_t* src, float* dst, int64_t nb);
void dequantize_q4_1(const uint8_t* src, float* dst, int64_t nb);
void dequantize_q5_0(const uint8_t* src, float* dst, int64_t nb);
void dequantize_q5_1(const uint8_t* src, float* dst, int64_t nb);
void dequantize_q8_0(const uint8_t* src, float* dst, int64_t nb);
void dequantize_q2_k(const uint8_t* src, float* dst, int64_t nb);
void dequantize_q3_k(const uint8_t* src, float* dst, int64_t nb);
void dequantize_q4_k(const uint8_t* src, float* dst, int64_t nb);
void dequantize_q5_k(const uint8_t* src, float* dst, int64_t nb);
void dequantize_q6_k(const uint8_t* src, float* dst, int64_t nb);
// Table formats (gguf_nonlinear_blocks.cpp).
void dequantize_iq4_nl(const uint8_t* src, float* dst, int64_t nb);
void dequantize_iq4_xs(const uint8_t* src, float* dst, int64_t nb);
void dequantize_mxfp4(const uint8_t* src, float* dst, int64_t nb);
// Their tables and scales, for the group-affine form (gguf_group_affine.cpp): IQ4's 16 values; MXFP4's
// e2m1 values doubled, with half of 2^(e - 127) as the scale; IQ4_XS sub-block ib's scale d * (ls - 32).
extern const int8_t kGgmlIq4Values[16];
extern const int8_t kGgmlE2m1Doubled[16];
float ggml_e8m0_half(uint8_t e);
float ggml_iq4_xs_scale(const uint8_t* block, int ib);

}  // namespace llmctl::quant
