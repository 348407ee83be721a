// Shared declarations of the scalar, AVX2 and AVX-512 variants behind qlinear.h (internal; the
// tests call each variant directly). Each variant fixes its own per-element reduction order, the
// same for every T and every [n0, n1) split; variants differ from each other in that order only.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/qlinear.h"
#include "kernels/scalar_types.h"

namespace llmctl::kernels::detail {

// Which variants this CPU can run (CPUID, checked once).
bool cpu_has_avx512_vnni();   // avx512f + bw + vl + vnni (AVX2 + FMA + F16C: cpu_has_avx2, linear.h)
bool cpu_has_avx_vnni();      // the CPU has AVX-VNNI (VEX vpdpbusd) beside AVX2 + FMA + F16C
bool rows_layout_selected();  // select_cpu_kernels(..., rows_layout = true)
// Throws KernelError for factored scales in the Rows layout without their D arrays, and for a
// codebook or narrow codes the selected kernels do not take (qweight_compact_codes_ok).
void check_scale_layout(const QWeightView& w);
// Throws KernelError unless w is what every row-lane kernel takes: the RowLane16 layout, a codebook
// only over plain 4-bit codes, 6-bit codes only narrow.
void check_rowlane_kind(const QWeightView& w);

// Blocks [b0, b1) of 32 activations x -> int8 codes q, scale[b] = absmax / 127 and the two half-block
// sums half_sum[2b + h] = the sum of the 16 codes, sum[2b + h] = scale * that, codes rounded to
// nearest even. The variants give the same bytes for finite inputs (quantize_activation_rows picks one).
void quantize_act_blocks_scalar(const float* x, int64_t b0, int64_t b1, int8_t* q, float* scale, float* sum,
                                int32_t* half_sum);
void quantize_act_blocks_avx2(const float* x, int64_t b0, int64_t b1, int8_t* q, float* scale, float* sum,
                              int32_t* half_sum);

// S[t * (K / group) + g] = the sum of x.sum over group g's half blocks of 16, in order: what the
// offset of group g multiplies in the Int8 mode. Every variant takes it from here.
void qact_group_sums(const QActivations& x, int group, float* S);
// H[t * (K / 16) + h] = the integer sum of token t's int8 activation codes in half block h (16
// inputs): what base x it corrects for codes stored from a base (narrow, codebook or VNNI codes).
void qact_half_sums(const QActivations& x, int32_t* H);
// Those sums for x: the quantizer's (x.half_sum) where x carries them, else added up into scratch
// (activations built without them).
const int32_t* qact_half_sums_of(const QActivations& x, std::vector<int32_t>& scratch);
// Tokens [t0, t1) of x into the tile arrays QActivations describes for tiles of `rows` tokens from
// token 0 (any may be null, not written; q16 and wc: tiles of 4, x with its half_sum), and where t1
// is x.t the padding of the last tile (tokens of zeros up to whole tiles). The quantizer's tiles, and
// the kernels' own where x comes without them (interleave_tokens, the AMX kernel).
void qact_write_tiles(const QActivations& x, int64_t t0, int64_t t1, int rows, int8_t* q, float* scale, float* sum,
                      int32_t* half_sum, int16_t* q16 = nullptr, int32_t* wc = nullptr);

// How the AVX2 prefill tiles without VNNI take a codebook (16 values) whose values span at most 128
// (GGUF IQ1 / IQ2 / IQ3's grids, MXFP4's): as narrow 8-bit codes, value - the least (the base: the
// table's qweight_code_range(16, table).lo, in any order), vpmaddubsw against the signed activations
// (|a| <= 127) summed in 16 bits STEP at a time: 1 (span <= 128: 2 x 128 x 127), 2 (<= 63) or 4 (<= 31),
// then + base x the activations' sums. 0: a wider codebook (IQ4_NL's levels), whose signed values the
// tiles widen to 16 bits instead.
inline int codebook_narrow_step(const int8_t* table) {
  const CodeRange r = qweight_code_range(16, reinterpret_cast<const uint8_t*>(table));
  const int span = r.hi - r.lo;
  return span <= 31 ? 4 : span <= 63 ? 2 : span <= 128 ? 1 : 0;
}

// How the AVX2 prefill tiles without VNNI take a codebook of step 1 (above) instead, where its values'
// magnitudes allow: as |value| against the activations given the values' signs (vpsignb), M
// vpmaddubsw summed in 16 bits (2 x M x max |value| x 127 < 32768), one vpmaddwd after them where
// narrow codes took one after each: M 3 for IQ2's grid (+-{8, 25, 43}), 2 for IQ3_XXS's (up to +-62);
// 0 for any other codebook (a span within 63 already sums 2 at a time; over +-64 only 1 would fit).
inline int codebook_magnitude_step(const int8_t* table) {
  if (codebook_narrow_step(table) != 1) return 0;
  int most = 0;
  for (int i = 0; i < 16; ++i) most = std::max(most, table[i] < 0 ? -int(table[i]) : int(table[i]));
  const int m = most == 0 ? 0 : 32767 / (2 * 127 * most);
  return m >= 3 ? 3 : m == 2 ? 2 : 0;
}

// Scale/offset element i of a row as f32.
inline float load_scale(ScaleType st, const void* p, int64_t i) {
  return st == ScaleType::F32 ? static_cast<const float*>(p)[i] : f16_to_f32(static_cast<const uint16_t*>(p)[i]);
}

#define LLMCTL_QLINEAR_VARIANT(isa)                                                                           \
  void qlinear_rows_f32_##isa(const float* x, int64_t T, const QWeightView& w, const float* bias, int64_t n0, \
                              int64_t n1, float* out, int64_t ldo);                                          \
  void qlinear_rows_q8_##isa(const QActivations& x, const QWeightView& w, const float* bias, int64_t n0,      \
                             int64_t n1, float* out, int64_t ldo);
LLMCTL_QLINEAR_VARIANT(scalar)
LLMCTL_QLINEAR_VARIANT(avx2)
LLMCTL_QLINEAR_VARIANT(avx512)
LLMCTL_QLINEAR_VARIANT(rowlane_scalar)
LLMCTL_QLINEAR_VARIANT(rowlane_avx2)
LLMCTL_QLINEAR_VARIANT(rowlane_avx512)
#undef LLMCTL_QLINEAR_VARIANT
// AMX (AMX-TILE + AMX-INT8 beside AVX-512 VNNI, the OS granting the tile state): the row-lane int8
// mode's whole tiles of 16 tokens (qlinear_rowlane_amx.h; the last T % 16 tokens run AVX-512's).
bool cpu_has_amx_int8();  // the CPU and OS can run it (CPUID, XCR0, Linux's permission; checked once)
bool amx_selected();      // select_cpu_kernels picked it (auto where cpu_has_amx_int8, or "amx")
bool prefetch_all_codes();  // the AVX2 decode tiles prefetch every kind of code (select_cpu_kernels)
bool codebook_magnitudes();  // the AVX2 prompt tiles take codebooks as magnitudes (select_codebook_prefill)
void qlinear_rows_q8_rowlane_amx(const QActivations& x, const QWeightView& w, const float* bias, int64_t n0,
                                 int64_t n1, float* out, int64_t ldo);
// AVX-VNNI: the row-lane int8 mode only (qlinear_rowlane_avxvnni.cpp); everything else runs AVX2's.
void qlinear_rows_q8_rowlane_avxvnni(const QActivations& x, const QWeightView& w, const float* bias, int64_t n0,
                                     int64_t n1, float* out, int64_t ldo);

// Where things are in the row-lane layout (qlinear.h), for the packer and the rowlane kernels.
// Group 16 (GGUF Q6_K, Q3_K, Q2_K): a geometry "group" (unit) is one block of 32 inputs holding two
// groups, halves = 2: its parameters are the scales of groups 2g and 2g + 1, then their offsets.
struct RowLaneGeometry {
  int halves;                // groups per unit: 2 for group 16, else 1
  int64_t blocks_per_group;  // blocks of 32 per unit: group / 32, 1 for group 16
  int64_t code_bytes;        // per block of 32 inputs x 16 rows: 256 (4 bits), 384 (6) or 512 (8)
  int64_t param_bytes;       // 16 scales or 16 offsets: 32 (f16), 64 (f32) or 16 (factored: int8 m)
  bool offsets;              // stored (implied_zero < 0)
  int64_t group_bytes;       // blocks_per_group * code_bytes + halves * (offsets ? 2 : 1) * param_bytes
  int64_t groups;            // units: K / group, K / 32 for group 16
  int64_t super_groups;      // units per super-block (8 groups) factored, else 1
  int super_shift;           // log2(super_groups): the kernels shift, never divide, per group
  int64_t header_bytes;      // ahead of a super-block's groups: 16 f16 D (+ 16 D'), factored; else 0
  int64_t super_bytes;       // header_bytes + super_groups * group_bytes
  int64_t row_block_bytes;   // groups / super_groups * super_bytes
};
RowLaneGeometry rowlane_geometry(int bits, int64_t k, int group, ScaleType st, int implied_zero);
constexpr int kFactoredGroups = 8;  // groups per super-block of ScaleType::Factored

// Group g of the row block at rb (its codes, then its parameters), and its super-block's header.
inline const uint8_t* rowlane_group(const RowLaneGeometry& geo, const uint8_t* rb, int64_t g) {
  return rb + (g >> geo.super_shift) * geo.super_bytes + geo.header_bytes + (g & (geo.super_groups - 1)) * geo.group_bytes;
}
inline const uint8_t* rowlane_header(const RowLaneGeometry& geo, const uint8_t* rb, int64_t g) {
  return rb + (g >> geo.super_shift) * geo.super_bytes;
}

// The groups of a row block in order, rowlane_group's and rowlane_header's pointers stepped (no
// multiply a group, and none of the geometry reloaded: a decode tile's loop is short enough per
// group for that to show). first(): group() starts a super-block (its header is header()).
class RowLaneGroupCursor {
 public:
  RowLaneGroupCursor(const RowLaneGeometry& geo, const uint8_t* rb)
      : hdr_(rb), gp_(rb + geo.header_bytes), group_bytes_(geo.group_bytes), header_bytes_(geo.header_bytes),
        per_super_(geo.super_groups), left_(geo.super_groups) {}
  const uint8_t* group() const { return gp_; }
  const uint8_t* header() const { return hdr_; }
  bool first() const { return left_ == per_super_; }
  void next() {
    gp_ += group_bytes_;
    if (--left_ == 0) hdr_ = gp_, gp_ += header_bytes_, left_ = per_super_;
  }

 private:
  const uint8_t* hdr_;
  const uint8_t* gp_;
  int64_t group_bytes_, header_bytes_, per_super_, left_;
};

// The row block at rb of a 6-bit weight (geometry g6; or a 4-bit codebook's) rewritten at out in the
// 8-bit layout (g8, the same weight's geometry at 8 bits): the same headers and parameters, each block's
// 384 (128) code bytes unpacked into 512 by unpack_block(src, dst) (the ISA's). Prefill unpacks a row
// block once for all its token tiles this way, then runs the 8-bit narrow tiles on it.
template <class Unpack>
void rowlane_unpack_to_eight(const RowLaneGeometry& g6, const RowLaneGeometry& g8, const uint8_t* rb, uint8_t* out,
                             Unpack&& unpack_block) {
  const int64_t bpg = g6.blocks_per_group;
  for (int64_t g = 0; g < g6.groups; ++g) {
    if ((g & (g6.super_groups - 1)) == 0 && g6.header_bytes)
      std::memcpy(const_cast<uint8_t*>(rowlane_header(g8, out, g)), rowlane_header(g6, rb, g), size_t(g6.header_bytes));
    const uint8_t* src = rowlane_group(g6, rb, g);
    uint8_t* dst = const_cast<uint8_t*>(rowlane_group(g8, out, g));
    for (int64_t j = 0; j < bpg; ++j) unpack_block(src + j * g6.code_bytes, dst + j * g8.code_bytes);
    std::memcpy(dst + bpg * g8.code_bytes, src + bpg * g6.code_bytes, size_t(g6.group_bytes - bpg * g6.code_bytes));
  }
}

// Row r's scale (which 0) or offset (which 1) of group h (0, or 1 for group 16's second) of a
// row-lane unit whose parameters start at params (after its codes), hdr its super-block's header:
// the one definition the SIMD kernels reproduce.
inline float rowlane_param(ScaleType st, const RowLaneGeometry& geo, const uint8_t* params, const uint8_t* hdr,
                           int which, int h, int r) {
  const int slot = which * geo.halves + h;
  if (st == ScaleType::Factored) {
    uint16_t d;
    std::memcpy(&d, hdr + 2 * (16 * which + r), 2);
    return f16_to_f32(d) * float(int8_t(params[16 * slot + r]));
  }
  return load_scale(st, params + slot * geo.param_bytes, r);
}

// f(std::integral_constant<ScaleType, st>{}): a kernel templated on its scale type, called for st.
template <class F>
void with_scale_type(ScaleType st, F&& f) {
  switch (st) {
    case ScaleType::F16: return f(std::integral_constant<ScaleType, ScaleType::F16>{});
    case ScaleType::F32: return f(std::integral_constant<ScaleType, ScaleType::F32>{});
    case ScaleType::Factored: return f(std::integral_constant<ScaleType, ScaleType::Factored>{});
  }
}

// Factored scales (qlinear.h): one row's `count` values v as D * float(m[i]) bit for bit, D an f16
// (*d its bits), m int8; false when no such pair exists (or a value is not finite). hint: a D (f16
// bits) to try before the search's last resort (factor_search), 0 for none.
bool factor_values(const float* v, int count, uint16_t* d, int8_t* m, uint16_t hint = 0);

// qweight_dequantize_row for each layout.
void dequantize_row_rows(const QWeightView& w, int64_t row, float* out);
void dequantize_row_rowlane(const QWeightView& w, int64_t row, float* out);

// Scale or offset element i of a Rows-layout weight as f32, from p (and d, factored: qlinear.h).
inline float rows_param(ScaleType st, const void* p, const uint16_t* d, int64_t i) {
  if (st == ScaleType::Factored) return f16_to_f32(d[i / kFactoredGroups]) * float(static_cast<const int8_t*>(p)[i]);
  return load_scale(st, p, i);
}
inline float rows_scale(const QWeightView& w, int64_t i) { return rows_param(w.scale_type, w.scale, w.scale_d, i); }
// Offset element i: -0.0 where none are stored (fma(c, s, -0) is c * s exactly).
inline float rows_offset(const QWeightView& w, int64_t i) {
  return w.offset ? rows_param(w.scale_type, w.offset, w.offset_d, i) : -0.0f;
}

// The offset of a row-lane group's row given its scale s when the offsets are implied (z >= 0).
// z = 0 gives -0.0, what the GGUF conversion writes for "no offset" (fma(c, s, -0) is c * s exactly).
inline float implied_offset(int z, float s) { return z == 0 ? -0.0f : s * float(-z); }

}  // namespace llmctl::kernels::detail
