// Group-affine quantized linear kernels (CPU): out[t, n] = sum_k x[t, k] * w[n, k] (+ bias[n]) with
//   w[n, k] = scale[n, g] * code[n, k] + offset[n, g],  g = k / group,
// codes 4-bit (0..15) or 8-bit (-128..127), scale/offset f16 or f32. The weight is never expanded
// to floats in memory: the kernels read the packed codes and dequantize in registers.
//
// Packed layout (qweight_pack; one row after another, qweight_row_bytes(bits, k) bytes each):
//   4 bits: per block of 32 inputs, 16 bytes; byte j holds input j in its low nibble and input
//           j + 16 in its high nibble (llama.cpp's Q4_0 order). K must be a multiple of 32.
//   8 bits: K bytes, the signed codes in order. K must be a multiple of 32.
// group: 16 or a multiple of 32, dividing K (16 is Q6_K's sub-block; 32 Q4_K's and Q8_0's).
//
// Row-lane layout (QLayout::RowLane16, qweight_pack_rowlane; groups of 16 or multiples of 32):
// rows in blocks of 16 (the last one padded with zero codes, scales and offsets), one SIMD lane per
// row, so a block's 16 outputs are reduced lane by lane with no horizontal sums. A row block is
// qweight_rowlane_block_bytes bytes; in it, per group g in order: the codes of its group / 32 blocks
// of 32 inputs, then the 16 rows' scales, then their offsets (scale_type: 16 f16 or 16 f32 each).
// Groups of 16: per block of 32 inputs, its codes, then the scales of its two groups, then their
// offsets (the kernels take two integer dot products a block, one a group).
//   4 bits: a block of 32 inputs is 4 vectors of 64 bytes; in vector v, bytes 4r..4r+3 are row r's:
//           byte j holds input 4v + j in its low nibble and input 16 + 4v + j in its high nibble.
//   8 bits: 8 vectors of 64 bytes; in vector v, byte 4r + j is row r's input 4v + j, code + 128
//           (stored unsigned, code ^ 0x80); narrow codes (QWeightView::narrow_base b, not
//           kWideCodes): code - b, every one in 0..63 (GGUF Q6_K's -32..31, Q5_K's 0..31: b = the
//           weight's least code), which the AVX2 kernels multiply without moving signs.
//   Narrow 4-bit codes: the nibble is code - b (0..15: Q3_K's -4..3 with b = -4), code = nibble + b.
//   2 bits (4-bit codes 0..3: GGUF Q2_K's; not narrow, no codebook): 2 vectors of 64 bytes, half the
//           4-bit layout's bytes. Vector u's byte holds the 4-bit layout's vectors 2u and 2u + 1's same
//           byte, each nibble's 2 low bits: bits 2s..2s+1 and 4+2s..5+2s are vector 2u + s's low and
//           high nibble. So the 4-bit layout's vector v is (vector v / 2 >> 2 (v % 2)) & 0x33.
//   3 bits (codes 0..7, plain or a codebook's positions, or narrow: stored = code - b in 0..7:
//           GGUF Q3_K's -4..3, the IQ2 / IQ1 grids' at most 8 values): 3 vectors of 64 bytes, the
//           4-bit layout's vectors 0..2 in their nibbles' low 3 bits, and vector 3's nibbles spread
//           over their top bits (bits 3 and 7): vector q's carry bit q of the same byte's. So vector
//           v < 3 is vector v & 0x77, and vector 3 is ((V0 >> 3) & 0x11) | ((V1 >> 2) & 0x22) |
//           ((V2 >> 1) & 0x44), as 6 bits spread a fourth vector over three.
//   6 bits (narrow codes only, stored = code - b in 0..63: GGUF Q6_K's and Q5_K's, in three quarters
//           of the 8-bit bytes): 6 vectors of 64 bytes, two quads of 3. Quad p holds the 8-bit
//           layout's vectors 4p..4p+3 (inputs 16p..16p + 15): its vectors V0, V1, V2 hold vectors
//           4p, 4p + 1, 4p + 2's stored bytes in their low 6 bits, and each byte of vector 4p + 3
//           is (V0 >> 6) | (V1 >> 6) << 2 | (V2 >> 6) << 4 of the same byte position.
// Scales and offsets travel inside the packed bytes (QWeightView::scale/offset are unused).
// Factored scales (ScaleType::Factored; qweight_factor finds them): the GGUF K-quants' two levels.
// Each row's groups in runs of 8 (a "super-block": 256 inputs at group 32) share an f16 multiplier
// D, and each group holds an int8 m; its scale is D * float(m) (and its offset D' * float(m')
// likewise), the product in f32: the f32 values the canonical form holds, bit for bit, in a quarter
// of the bytes (Q4_K: 0.578 bytes a weight against 0.75). In the row-lane layout a row block is
// then, per super-block: 16 f16 D of the scales (and 16 D' of the offsets), then its 8 groups, each
// its codes and 16 int8 m (and 16 m'), in place of the 16 f16/f32 scales (offsets). In the Rows
// layout QWeightView::scale (offset) point to the m [n, k / group] and scale_d (offset_d) to the D
// [n, k / group / 8]. The AVX-512 Rows kernels do not take them (qweight_factored_ok).
// Shifted scales (QWeightView::out_shift = s > 0, RowLane16): the weight's scales and offsets are
// stored times 2^s, for D that would be f16 subnormals otherwise (GGUF IQ2_XXS's d / 8 for d below
// 2^-11); qlinear_rows_* and qweight_dequantize_row multiply their results by 2^-s (then add the
// bias): every product and sum was 2^s times the unshifted one, exactly, so the values are the same.
// Codebook (QWeightView::codebook; RowLane16 with 4-bit codes: qweight_compact_codes_ok, as for
// narrow codes): code c stands for the int8 codebook[c],
// w = scale * codebook[c] + offset. An 8-bit weight whose codes take at most 16 values (GGUF IQ4_NL /
// IQ4_XS's non-linear levels, MXFP4's; qweight_codebook finds them) and are not within 15 of their
// least (narrow 4-bit codes, above) is packed so: the same values in half the bytes.
// Implied zero point z >= 0 (qweight_implied_zero: every offset is exactly -z * scale, as in GGUF
// Q4_0 (z = 8) and Q8_0 (z = 0, offsets -0.0)): the offsets are not stored, and the kernels take
// -z * scale, the same values (z = 0: the int8 mode skips its offset term, adding -0 x S, which
// could only turn an exactly -0 sum into +0): fewer bytes streamed per token.
//
// Activations: ActQuant::None multiplies the f32 activations (exact up to summation order);
// ActQuant::Int8 first quantizes each activation row per block of 32 to int8 with one f32 scale
// (absmax / 127, round to nearest) and uses integer dot products, as llama.cpp does (Q8_0/Q8_1):
// faster, at a small accuracy cost that is measured, not assumed.
// Batch invariance: every output element is reduced in the same order whatever T is and however the
// rows [n0, n1) are split among threads, so a request gives the same bits alone or batched.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace llmctl::kernels {

enum class ScaleType { F16, F32, Factored };  // Factored: above
enum class ActQuant { None, Int8 };
enum class QLayout { Rows, RowLane16 };  // the two packed layouts above

constexpr int kWideCodes = -1000;  // QWeightView::narrow_base of 8-bit codes stored code ^ 0x80

struct QWeightView {
  int bits = 4;         // 4 or 8; 6 (RowLane16, narrow codes only); 2 (RowLane16, codes 0..3); 3 (RowLane16)
  int64_t n = 0, k = 0;
  int group = 32;
  QLayout layout = QLayout::Rows;
  const uint8_t* packed = nullptr;  // Rows: n * qweight_row_bytes(bits, k) bytes; RowLane16: see above
  ScaleType scale_type = ScaleType::F32;
  const void* scale = nullptr;   // Rows: [n, k / group]; RowLane16: unused
  const void* offset = nullptr;  // Rows: [n, k / group], or null: every offset -0.0 (GGUF Q8_0 / Q5_0 /
                                 // Q6_K: no zero point), not stored; RowLane16: unused
  int implied_zero = -1;         // RowLane16: -1 offsets stored; z >= 0: offset = -z * scale, not stored
  const uint16_t* scale_d = nullptr;   // Rows, ScaleType::Factored: f16 D [n, k / group / 8] of the
  const uint16_t* offset_d = nullptr;  // scales (offsets), whose int8 m are at scale (offset)
  const int8_t* codebook = nullptr;    // RowLane16, bits 4: the 16 values the codes stand for, or null
  int narrow_base = kWideCodes;        // RowLane16: narrow codes' base, or kWideCodes (above)
  // Narrow 8- or 6-bit codes that are all within 31 of the base (GGUF Q5_K / Q5_0 / Q5_1's 0..31):
  // the AVX2 prefill tile sums four vpmaddubsw in 16 bits (at most 8 x 31 x 127), not two.
  bool narrow_five = false;
  int out_shift = 0;  // RowLane16: scales and offsets stored times 2^out_shift (above); 0: as they are
};

// Factored scales as the packers take them: values [n, G] (G = k / group, a multiple of 8) as
// m [n, G] int8 and d [n, G / 8] f16 bits, value i = f16(d[i / 8]) * float(m[i]) in f32.
struct FactoredParams {
  std::vector<int8_t> m;
  std::vector<uint16_t> d;
};

// Bytes of one packed row.
int64_t qweight_row_bytes(int bits, int64_t k);

// Packs codes [n, k] (one per byte: 0..15 for 4 bits, int8 as uint8 for 8 bits) into the layout
// above (out: n * qweight_row_bytes bytes).
void qweight_pack(int bits, int64_t n, int64_t k, const uint8_t* codes, uint8_t* out);
// The reverse (tests, and dequantization for backends without these kernels).
void qweight_unpack(int bits, int64_t n, int64_t k, const uint8_t* packed, uint8_t* codes);

// The row-lane layout: bytes of one block of 16 rows (ceil(n / 16) blocks in all), the packing of
// codes [n, k] (as qweight_pack takes them) with scale/offset [n, k / group] of scale_type, and the
// codes back (tests). group: 16 or a multiple of 32 dividing k. ScaleType::Factored: scale and offset point
// to FactoredParams (offset's unused when implied_zero >= 0).
int64_t qweight_rowlane_block_bytes(int bits, int64_t k, int group, ScaleType st, int implied_zero = -1);
// narrow_base: stored as narrow codes from this base (each code - base in 0..63, 0..15 for 4 bits;
// the codes are then int8 as uint8, as for 8 bits). bits 6: narrow codes only (within 63 of the base).
void qweight_pack_rowlane(int bits, int64_t n, int64_t k, int group, ScaleType st, const uint8_t* codes,
                          const void* scale, const void* offset, uint8_t* out, int implied_zero = -1,
                          int narrow_base = kWideCodes);
void qweight_unpack_rowlane(int bits, int64_t n, int64_t k, int group, ScaleType st, const uint8_t* packed,
                            uint8_t* codes, int implied_zero = -1, int narrow_base = kWideCodes);
// The factors of the f32 values v [n, k / group] (scales or offsets) as ScaleType::Factored describes
// them: k / group a multiple of 8 and, for each row's run of 8 groups, an f16 D and int8 m with
// D * float(m) equal to each value bit for bit (GGUF K-quants' d * sc and -(dmin * m), IQ4_XS's
// d * (ls - 32) do). False at the first run that has none (out is then unspecified).
bool qweight_factor(int64_t n, int64_t k, int group, const float* v, FactoredParams* out);
// Whether this CPU's kernels take factored scales in `layout` (not the AVX-512 Rows kernels).
bool qweight_factored_ok(QLayout layout);
// The codebook of 8-bit codes [count] (int8, as uint8) when they take at most 16 distinct values:
// table[16] those values ascending (the last repeated to fill it), index[i] (count bytes) the
// position of code i in it (index may be null: the table only); false (index unspecified) otherwise.
bool qweight_codebook(int64_t count, const uint8_t* codes, int8_t* table, uint8_t* index);
// index[i] = the position of code i in table[16] (a qweight_codebook table: ascending, the last
// repeated) for codes [count]; false at the first code the table lacks (index then unspecified).
bool qweight_codebook_positions(int64_t count, const uint8_t* codes, const int8_t* table, uint8_t* index);
// Whether this CPU's kernels take a codebook, and narrow codes, in `layout` (RowLane16: every ISA's
// row-lane kernels do).
bool qweight_compact_codes_ok(QLayout layout);
// Whether the selected kernels take 3-bit row-lane codes (the AVX2 and AVX-VNNI ones; the AVX-512 and
// AMX kernels refuse them, so the packer keeps 4 bits there).
bool qweight_three_bit_ok();
// The least and greatest of 8-bit codes [count] (int8, as uint8; count > 0), in one pass.
struct CodeRange {
  int lo = 0, hi = 0;
};
CodeRange qweight_code_range(int64_t count, const uint8_t* codes);
// The base of such codes stored narrow: their least value when every one is within span of it (63 for
// 8-bit narrow codes, 15 for 4-bit ones); else kWideCodes.
inline int narrow_base_of(CodeRange r, int span) { return r.hi - r.lo <= span ? r.lo : kWideCodes; }
inline int qweight_narrow_base(int64_t count, const uint8_t* codes, int span = 63) {
  return count > 0 ? narrow_base_of(qweight_code_range(count, codes), span) : kWideCodes;
}
// z (0, or 8 for 4 bits) when every offset [n, k / group], as f32, is bit for bit z == 0 ? -0.0 :
// scale * -z (GGUF Q8_0 / Q5_0: -0.0, Q4_0: -8 x scale); else -1.
int qweight_implied_zero(int bits, int64_t n, int64_t k, int group, ScaleType st, const void* scale, const void* offset);
// The layout a backend should pack (bits, group) weights in on this CPU: RowLane16 where the
// AVX-512 or AVX2 variant (AVX-VNNI's too) runs and group is 16 or a multiple of 32; else Rows. Every
// variant runs both layouts for the groups it takes (the scalar one runs RowLane16 through its
// reference: correct, slow, never picked here).
// select_cpu_kernels(..., rows_layout = true) keeps Rows everywhere (to measure the two).
QLayout qweight_preferred_layout(int bits, int group);

// Activations of ActQuant::Int8, quantized once per call (before rows are split among threads):
// q [T, K] int8, scale [T, K / 32] f32 (one per block of 32), sum [T, K / 16] f32 (scale * the sum
// of the codes of each half block of 16: what an offset multiplies, for groups of 16 or more).
struct QActivations {
  int64_t t = 0, k = 0;
  const int8_t* q = nullptr;
  const float* scale = nullptr;
  const float* sum = nullptr;
  // [T, K / 16] the codes' integer sums per 16 (quantize_activations writes them; null: the kernels
  // that need them add them up themselves)
  const int32_t* half_sum = nullptr;
  // The same tokens in tiles of tile_rows (0: none) for the prefill kernels, written by the quantizer
  // once instead of by each thread that takes some of the rows: tiles of 16 where AMX runs (whole
  // tiles only: T / 16 of them), of 4 for the AVX-512 and AVX2 ones (TokenTiles; (T + 3) / 4, the last
  // padded with tokens of zeros). A view keeps them where it starts at a tile (and, for tiles of 4,
  // ends at one or at x's end).
  //   tile_q        [tiles][K / 32][tile_rows][32]  a block's codes, token after token
  //   tile_scale    [tiles][K / 32][tile_rows]      scale, the tile's tokens side by side
  //   tile_sum      [tiles][K / 16][tile_rows]      sum, likewise (tiles of 16)
  //   tile_half_sum [tiles][K / 16][tile_rows]      half_sum, likewise (tiles of 4)
  // and, asked for (quantize_activation_rows' widened: weights qlinear_widens_activations names), the
  // codes as int16 for the AVX2 tiles that widen them (tiles of 4):
  //   tile_q16      [tiles][K / 32][4][32]  each quad of inputs 4i..4i+3 as 4i, 4i + 2, 4i + 1, 4i + 3
  //   tile_wc       [tiles][K / 32][4]      -128 x a block's integer sum
  int tile_rows = 0;
  const int8_t* tile_q = nullptr;
  const float* tile_scale = nullptr;
  const float* tile_sum = nullptr;
  const int32_t* tile_half_sum = nullptr;
  const int16_t* tile_q16 = nullptr;
  const int32_t* tile_wc = nullptr;
};
// Bytes of the buffer quantize_activations needs for [T, K] (widened: quantize_activation_rows'
// int16 tiles too).
size_t qactivation_bytes(int64_t T, int64_t K, bool widened = false);
// Quantizes x [T, K] f32 into buf (qactivation_bytes long, 64-byte aligned); the view points into it.
QActivations quantize_activations(const float* x, int64_t T, int64_t K, void* buf);
// The same for rows [t0, t1) only, written where quantize_activations puts them (threads split the
// rows; each row's bytes do not depend on the split). Returns the view of all T rows. widened: the
// int16 tiles too (every call for the same buffer passes the same, and the buffer is
// qactivation_bytes(T, K, true) long).
QActivations quantize_activation_rows(const float* x, int64_t T, int64_t K, int64_t t0, int64_t t1, void* buf,
                                      bool widened = false);
// Rows from which the quantizer writes the prefill kernels' tiles (QActivations::tile_rows; AMX: 16).
inline constexpr int64_t kActTileMinRows = 4;
// The same for blocks [b0, b1) of x's T x K / 32 (row-major) only, where T < kActTileMinRows (no
// tiles: a decode step's few rows, whose blocks threads split). Each block's bytes
// do not depend on the split. Returns the view of all T rows.
QActivations quantize_activation_blocks(const float* x, int64_t T, int64_t K, int64_t b0, int64_t b1, void* buf);
// Whether the chosen kernels' prefill over w widens the activations to int16 (AVX2 without VNNI:
// codebooks and wide 8-bit codes in groups of 32 or more): quantize_activation_rows then writes them
// once for every thread (widened) where otherwise each thread would.
bool qlinear_widens_activations(const QWeightView& w);
// Rows [t0, t1) of x as a view of their own (the kernels then compute those tokens alone: a token's
// results do not depend on the rows beside it).
QActivations qactivation_rows(const QActivations& x, int64_t t0, int64_t t1);

// out[t * ldo + n] for t < T, n in [n0, n1).
void qlinear_rows_f32(const float* x, int64_t T, const QWeightView& w, const float* bias, int64_t n0, int64_t n1,
                      float* out, int64_t ldo);
void qlinear_rows_q8(const QActivations& x, const QWeightView& w, const float* bias, int64_t n0, int64_t n1,
                     float* out, int64_t ldo);

// Row `row` of the weight as floats, out[k] = scale * code + offset (the product rounded, then the
// offset added: the values quant::dequantize gives), in the packed column order: an embedding
// lookup into a quantized table, without the table in floats. Either layout.
void qweight_dequantize_row(const QWeightView& w, int64_t row, float* out);

// The SIMD level the quantized kernels use ("avx512-vnni", "avx-vnni", "avx2", "scalar"): the best
// the CPU has,
// unless select_cpu_kernels stepped down.
const char* qlinear_isa();
// Whether the int8 mode's prompts (16 tokens or more) over row-lane weights run on AMX tiles (at the
// avx512-vnni level, where the CPU and OS offer AMX-INT8: Sapphire Rapids and later; the same bits).
bool qlinear_amx();
// Whether a pass of a few tokens over a quantized weight is bound by reading its bytes on that
// level, so that its parts cost what they weigh: AVX-512 (a decode step's linears, rdtsc per piece:
// Q6_K's row blocks 1.38x Q4_K's time, 1.44x their bytes). On AVX2 unpacking narrow codes costs about
// as much as reading them (Q5_0's 6-bit row blocks took 1.25x the time of Q8_0's 8-bit ones).
bool qlinear_read_bound();
// Which codes the AVX2 / AVX-VNNI decode tiles prefetch ahead of the stream (8 KB, as the AVX-512 ones
// prefetch every kind): "all", or "wide" (wide 8-bit codes only, the hardware's prefetchers left the
// rest). The outputs are the same bits either way; only the speed differs, by machine.
const char* qlinear_prefetch();
// How the AVX2 prompt tiles without VNNI take a codebook whose values span over 63 and whose magnitudes
// allow it (GGUF IQ2's grid, IQ3_XXS's), from 4 tokens: "magnitude" (|value| against the activations
// given the values' signs: vpsignb, then 3 or 2 vpmaddubsw a vpmaddwd) or "narrow" (value - the least:
// a vpmaddwd after each vpmaddubsw). The same bits either way.
const char* qlinear_codebook_prefill();
// For A/B runs and tests (llmctl_cpu_qlinear_bench --codebook-prefill): "auto" (magnitude on AMD CPUs,
// whose vpsignb runs beside the multiplies: a Zen 2's kernel 1.21-1.28x; narrow elsewhere, where
// Intel's runs on the multiplies' two ports and would add to them), "magnitude" or "narrow" (throws
// KernelError for another name).
void select_codebook_prefill(std::string_view choice);
// For measurements and A/B runs (llmctl --cpu-isa, --cpu-qweight-layout, --cpu-weight-prefetch): isa
// "auto" (the best the CPU has), "amx" (avx512-vnni with AMX prompts), "avx512-vnni" (without),
// "avx-vnni", "avx2" or "scalar" (throws KernelError for one the CPU lacks or an unknown name);
// rows_layout keeps quantized weights in the Rows layout (qweight_preferred_layout); prefetch "auto"
// ("all" on AMD family 17h, Zen 1 / 2, where it measured faster; else "wide"), "all" or "wide"
// (qlinear_prefetch). One choice per process, made before any weight is packed (the CPU backend's
// construction).
void select_cpu_kernels(std::string_view isa, bool rows_layout, std::string_view prefetch = "auto");

}  // namespace llmctl::kernels
