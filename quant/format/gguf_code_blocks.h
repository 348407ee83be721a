// The GGML block formats whose elements are int8 codes times one scale per group of 16 or 32, with
// no offset: the IQ grid formats (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M: grid entries
// of 4 or 8 values, with sign bits) and the ternary ones (TQ1_0, TQ2_0). All have 256-element
// blocks. One decoder per format gives the codes and the scales; dequantization (gguf_blocks.h's
// dequantize_row) and the group-affine form (gguf_group_affine.h) are both made from it, so they
// cannot disagree. The values are gguf.quants.dequantize's bit for bit:
//   IQ2_*, IQ3_*  code = +-grid value, scale = the format's sub-block scale (d * (0.5 + s) / 4, ...)
//   IQ1_S, IQ1_M  value dl * (g + delta), g in {-1, 0, 1}, delta +-1/8: code = 8 g +- 1 and scale
//                 dl / 8 (exact: dl / 8 is a normal f32), so scale * code rounds the same product once
//   TQ1_0, TQ2_0  code = q - 1, scale = d (each group of 32 of the block: the same d)
// The grids come from the Python gguf package's quants.py (scripts/gen-iq-grids.py at configure).
#pragma once
#include <cstdint>

namespace llmctl::quant {

// Whether GGML type id `type` is one of the formats above.
bool ggml_code_block_type(uint32_t type);
// Its group size: 16 (IQ2_XS, IQ2_S, IQ1_M) or 32; 0 for a type not above.
int ggml_code_block_group(uint32_t type);

// One 256-element block of `type` at b: codes[256] and scales[256 / group]. The block's bytes are
// untrusted: every bit pattern decodes (grid indices are masked to the grid's size).
void ggml_code_block_decode(uint32_t type, const uint8_t* b, int8_t* codes, float* scales);

// nb blocks of `type` to f32: scale * code (the list above).
void dequantize_code_blocks(uint32_t type, const uint8_t* src, float* dst, int64_t nb);

}  // namespace llmctl::quant
