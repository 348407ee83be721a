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
//                         at most 16 distinct codes, as GGUF IQ4_NL / IQ4_XS; 3-bit ones for at most
//                         8 where qweight_three_bit_ok, as the IQ1 / IQ2 grids), the codebook,
//                         the bits 8-bit codes are stored in when narrow (int32 0: not narrow; 6:
//                         within 63 of their least, as GGUF Q6_K / Q5_K, stored code - base; 4:
//                         within 15; 3: within 7, as Q3_K, where qweight_three_bit_ok) and the base
//                         (int32; kWideCodes for plain 4- or 3-bit codes and 2-bit codes 0..3);
//                         whether narrow codes are all within 31 of it (int32 0/1, as Q5_K); the
//                         power of two factored scales
//                         are stored times (int32 s: 2^s, for D that would be f16 subnormals,
//                         as GGUF IQ2_XXS's; 0 none);
//                         scales and zeros left empty (the kernels read the copies in data)
#pragma once
#include <vector>

#include "engine/backend/linear_weight.h"
#include "kernels/cpu/qlinear.h"

namespace llmctl {

class HostArena;
class ThreadPool;

int quantized_bits(WeightFormat f);  // 4 or 8; throws for dense formats

// Checks the canonical weight (shapes, dtypes, group, 4-bit codes <= 15) and packs it, its rows
// spread over the pool's threads where one is given (the same bytes either way); its packed bytes
// carved from the arena where one is given (HostArena: small weights on huge pages too).
LinearWeight pack_cpu_quantized(const LinearWeight& canonical, ThreadPool* pool = nullptr, HostArena* arena = nullptr);

// Checks a packed weight and returns the kernels' view of it (not of a weight of parts: below).
kernels::QWeightView cpu_qweight_view(const LinearWeight& packed);

// A canonical weight of fused parts (LinearWeight::part_rows, each whole row blocks of 16) is packed
// part by part, each in its own form (a codebook part and a 5-bit one: 4-bit positions and 6-bit
// codes, not 8-bit codes for both; groups merged back where a part's pairs are equal); parts whose
// forms agree are one packing. The kernels' views of a packed weight's parts, each with its first
// row (one part, row 0, for every other weight).
struct CpuQSegment {
  int64_t row0 = 0;
  kernels::QWeightView view;
};
std::vector<CpuQSegment> cpu_qweight_segments(const LinearWeight& packed);

// What pack_cpu_quantized read from the weight it packed (LinearWeight::packed_view): its parts.
struct CpuPackedView final : PackedWeightView {
  std::vector<CpuQSegment> parts;  // cpu_qweight_segments of the packed weight
};
// The packed weight's parts: its CpuPackedView's when it has one for these bytes, else read from the
// bytes into `scratch` (cpu_qweight_segments: a weight packed elsewhere, or a copy with other data).
const std::vector<CpuQSegment>& cpu_qweight_parts(const LinearWeight& packed, std::vector<CpuQSegment>& scratch);

}  // namespace llmctl
