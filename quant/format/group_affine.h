// The group-affine form of a quantized linear weight, between a checkpoint's layout and a backend's
// packed layout (engine/backend/linear_weight.h, WeightFormat::Int4Group / Int8Group):
//   w[n, k] = scale[n, g] * code[n, k] + offset[n, g],  g = k / group.
// Every layout llmctl reads converts to it exactly where it can (the converters below and in
// gguf_group_affine.h say which cannot, and why, so that a loader falls back to dense and says so).
// No engine dependency: plain vectors, std exceptions.
//
// Shapes: N = output features (rows), K = input features, G = K / group.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "quant/format/quantized_linear.h"

namespace llmctl::quant {

// An allocator whose value-less construct leaves a byte uninitialized: a weight's codes are written
// by its decoder right after they are sized (a model's worth of zeros written first cost its load
// a pass over memory on one thread).
template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  using std::allocator<T>::allocator;
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
using Codes = std::vector<uint8_t, DefaultInitAllocator<uint8_t>>;

struct GroupAffineWeight {
  int bits = 4;  // 4: codes 0..15; 8: codes -128..127, stored as their uint8 bit pattern
  int64_t n = 0, k = 0;
  int group = 32;               // inputs per group; divides k
  Codes codes;                  // [N, K], one code per byte (sized: uninitialized until written)
  std::vector<float> scale;     // [N, G]
  std::vector<float> offset;    // [N, G]
  // Act-order: column j of codes is input feature perm[j], so that each group's columns are
  // contiguous (GPTQ desc_act / llm-compressor actorder="group" scatter them). The product is then
  // x[:, perm] @ codes^T: the kernels gather the activations' columns once per call. Empty: identity.
  std::vector<int32_t> perm;    // [K] or empty
  // Rows of the weights concat_rows fused into this one, in order (q, k, v), when they were more
  // than one; a backend may keep each in its own form (their common one can take more bytes).
  std::vector<int64_t> part_rows;

  int64_t groups() const { return group > 0 ? k / group : 0; }
  // The signed value of code i (row-major index into codes).
  int code_value(size_t i) const { return bits == 8 ? int(int8_t(codes[i])) : int(codes[i]); }
  // Bits 4 or 8, group positive and dividing k, sizes matching, 4-bit codes <= 15, perm empty or a
  // permutation of 0..K-1. Throws std::invalid_argument naming the problem. Scales may be negative
  // (GGUF Q6_K's are signed).
  void validate() const;
};

// A range of rows or columns: [begin, begin + length).
using IndexRange = std::pair<int64_t, int64_t>;

// From the unpacked form of compressed-tensors / AutoAWQ / GPTQ (w = (q - zero) * scale):
//   4 bits: code = q, offset = -zero * scale
//   8 bits: code = q - 128 (signed), offset = (128 - zero) * scale (0 for symmetric)
// group -1 (per channel) becomes group = K. A g_idx other than k / group_size (act-order without
// static groups) puts the columns of one group apart: the columns are then sorted by group (stable)
// into perm, which is exact when every group has group_size columns (as GPTQ writes them); nullopt,
// with *why_not set, otherwise, and the caller dequantizes to dense.
// The values scale * code + offset equal (q - zero) * scale up to f32 rounding (one ulp or so),
// not bit for bit.
std::optional<GroupAffineWeight> group_affine_from_quantized(const QuantizedLinear& w, std::string* why_not);

// [N, K] row-major f32 in input order (perm undone): scale * code + offset, each product and sum
// rounded on its own (no FMA), so that converters that are exact give the source's values bit for bit.
std::vector<float> dequantize(const GroupAffineWeight& w);

// A copy as 8-bit codes with the same values (a 4-bit code 0..15 is the same int8 value).
GroupAffineWeight widen_to_8_bits(const GroupAffineWeight& w);
// A copy with a smaller group that divides the current one (each scale/offset repeated).
GroupAffineWeight split_groups(const GroupAffineWeight& w, int group);

// The rows of parts one after another (fusing q/k/v or gate/up). Parts must share K. Parts of
// different bits or groups are brought to one form first, exactly (4-bit parts widened to 8 bits;
// groups split to the smallest when it divides every other); nullopt with *why_not when that
// cannot be done (K differs, no group size divides the others, or the parts' perms differ: one
// gather of the activations must serve the fused weight).
std::optional<GroupAffineWeight> concat_rows(const std::vector<const GroupAffineWeight*>& parts, std::string* why_not);

// The listed row ranges, in order, as one weight (tensor-parallel column split; GGUF q/k row
// permutation). Throws std::invalid_argument for a range outside [0, N).
GroupAffineWeight select_rows(const GroupAffineWeight& w, const std::vector<IndexRange>& rows);
// The listed column ranges, in order (tensor-parallel row split). A range that cuts a group splits
// it: the result's groups are the largest size dividing w.group and every range's start and length,
// each with the scale and offset of the group it came from (the same values, so dequantize() and
// every product are unchanged). w must have no perm (a rank's input columns would not be whole
// groups): throws std::invalid_argument for a perm or a range outside [0, K).
GroupAffineWeight select_columns(const GroupAffineWeight& w, const std::vector<IndexRange>& cols);

// Column ranges widened to whole units (quantization groups or packed blocks: a decoder can only cut
// a checkpoint there): `cover`, runs of whole units (the last may end at extent, short of a unit),
// each run merged with the one before when it continues it; `within`, each range of `cols` in the
// columns of the covers laid end to end. select_columns(decode(cover), within) is then
// select_columns(decode(all), cols). Throws std::invalid_argument for a range outside [0, extent).
struct ColumnCover {
  std::vector<IndexRange> cover;
  std::vector<IndexRange> within;
};
ColumnCover cover_columns(const std::vector<IndexRange>& cols, int64_t unit, int64_t extent);

}  // namespace llmctl::quant
