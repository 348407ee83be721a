// GGUF block types in group-affine form (group_affine.h), exactly: dequantize() of the result gives
// gguf_blocks.h's dequantize_row values bit for bit (for finite block scales; a zero may differ in
// sign only, -0 vs +0, in Q4_0, where the reference computes d * (q - 8) and this d * q + (-8 * d), and
// in TQ1_0 / TQ2_0 alike: d * (q - 1) against d * q + (-d)).
// "offset 0" below is stored as -0.0f (x + -0 is x, bit for bit).
//   Q4_0  4-bit codes q,        group 32, scale d,        offset -8 * d
//   Q4_1  4-bit codes q,        group 32, scale d,        offset m
//   Q5_0  8-bit codes q - 16,   group 32, scale d,        offset 0
//   Q5_1  8-bit codes q,        group 32, scale d,        offset m
//   Q8_0  8-bit codes q,        group 32, scale d,        offset 0
//   Q2_K  4-bit codes q (0..3), group 16, scale d * sc,   offset -(dmin * m)   (per sub-block)
//   Q3_K  8-bit codes q (-4..3), group 16, scale d * (sc - 32), offset 0
//   Q4_K  4-bit codes q,        group 32, scale d * sc,   offset -(dmin * m)   (per sub-block)
//   Q5_K  8-bit codes q,        group 32, scale d * sc,   offset -(dmin * m)
//   Q6_K  8-bit codes q - 32,   group 16, scale d * sc,   offset 0
//   IQ4_NL  8-bit codes table[q] (IQ4's 16 values),  group 32, scale d,             offset 0
//   IQ4_XS  8-bit codes table[q],                    group 32, scale d * (ls - 32), offset 0
//   MXFP4   8-bit codes 2 x e2m1[q],                 group 32, scale 2^(e - 128),   offset 0
//   IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M: 8-bit codes, group 16 or 32, scale, offset 0, as
//           gguf_code_blocks.h decodes them (IQ1's codes in eighths: 8 g +- 1, scale dl / 8)
//   TQ1_0, TQ2_0  8-bit codes q (0..2; TQ2_0 also 3), group 32, scale d, offset -d (2-bit codes at load)
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "quant/format/group_affine.h"

namespace llmctl::quant {

// Whether GGML type id `type` converts (the list above).
bool gguf_group_affine_supported(uint32_t type);

// Throws std::invalid_argument when an [n, k] tensor of `type` (one the list has) stored in nbytes is
// not whole blocks per row or its byte count does not match: the checks group_affine_from_gguf
// makes before it reads a byte, for a loader that decodes later.
void check_gguf_group_affine_shape(uint32_t type, size_t nbytes, int64_t n, int64_t k);

// The same conversion in two steps, for a loader that spreads it over threads: the weight with its
// sizes set and its arrays allocated (after check_gguf_group_affine_shape's checks; the codes
// uninitialized until converted: every block must be), then blocks [b0, b1) of the data (nbytes
// long, rows of k / block_size blocks) converted into it; disjoint ranges write disjoint elements,
// so they may run concurrently. gguf_group_affine_blocks: how many.
GroupAffineWeight gguf_group_affine_shell(uint32_t type, size_t nbytes, int64_t n, int64_t k);
int64_t gguf_group_affine_blocks(uint32_t type, int64_t n, int64_t k);
void gguf_group_affine_convert(uint32_t type, const uint8_t* data, int64_t b0, int64_t b1, GroupAffineWeight& w);

// The [n, k] tensor of `type` stored at data (nbytes long, rows of k / block_size blocks).
// nullopt with *why_not for a type not in the list. Throws std::invalid_argument when k is not a
// multiple of the block size or nbytes does not match the shape.
std::optional<GroupAffineWeight> group_affine_from_gguf(uint32_t type, const uint8_t* data, size_t nbytes, int64_t n,
                                                        int64_t k, std::string* why_not);

}  // namespace llmctl::quant
