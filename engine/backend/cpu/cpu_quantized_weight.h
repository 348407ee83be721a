// The CPU backend's quantized linear weights (Int4Group / Int8Group): packing the loader's
// canonical form into kernels/cpu/qlinear.h's layout, and the kernels' view of a packed weight.
//   canonical: data = codes one per byte [N, K] (U8; I8 or U8 for 8 bits), scales and zeros
//              (= offsets) [N, K / group_size] F16 or F32
//   packed:    the layout kernels::qweight_preferred_layout picks on this CPU (one per process):
//              Rows:      data = U8 [N, qweight_row_bytes(bits, K)], scales and zeros kept
//              RowLane16: data = U8 [ceil(N / 16) + 1, qweight_rowlane_block_bytes] (codes, scales
//                         and offsets interleaved by blocks of 16 rows), then one descriptor row:
//                         "RL16", the implied zero point (int32: -1 offsets stored, 0 or 8 not),
//                         the scale type (int32: 0 f32, 1 f16, 2 factored: f32 scales and offsets
//                         that are an f16 x an int8, as GGUF K-quants', kept as the two factors),
//                         whether 8-bit codes are kept as 4-bit positions in a codebook (int32 0/1:
//                         at most 16 distinct codes, as GGUF IQ4_NL / IQ4_XS), the codebook,
//                         the bits 8-bit codes are stored in when narrow (int32 0: not narrow; 6:
//                         within 63 of their least, as GGUF Q6_K / Q5_K, stored code - base; 4:
//                         within 15, as Q3_K) and the base (int32);
//                         scales and zeros left empty (the kernels read the copies in data)
#pragma once
#include "engine/backend/linear_weight.h"
#include "kernels/cpu/qlinear.h"

namespace llmctl {

int quantized_bits(WeightFormat f);  // 4 or 8; throws for dense formats

// Checks the canonical weight (shapes, dtypes, group, 4-bit codes <= 15) and packs it.
LinearWeight pack_cpu_quantized(const LinearWeight& canonical);

// Checks a packed weight and returns the kernels' view of it.
kernels::QWeightView cpu_qweight_view(const LinearWeight& packed);

}  // namespace llmctl
