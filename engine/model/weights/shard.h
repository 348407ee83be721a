// Tensor-parallel slicing of host weights by a ShardSpec (engine/backend/linear_weight.h), and the
// inverse. The split dimension is dim 0 for Column and Vocab, the last dim for Row; a Replicated
// tensor is the same on every rank.
//
// A rank's slice is the concatenation, in order, of its segments of the split dimension: for each
// part of a fused weight, `heads / world` consecutive heads starting at `rank * heads / world`
// (or, for a part with replicate_if_fewer and fewer heads than ranks, the one head
// `rank * heads / world`). So a fused qkv [(Hq + 2*Hkv) * D, H] split 2 ways gives rank r
// [q heads of r | k heads of r | v heads of r], which is again a qkv layout with Hq/2 and Hkv/2
// heads, and a column-parallel linear's per-rank outputs reassemble with the same segments.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/backend/linear_weight.h"
#include "engine/core/tensor.h"
#include "quant/format/group_affine.h"

namespace llmctl {

struct ShardSegment {
  int64_t begin = 0, length = 0;  // a range of the split dimension of the full tensor
};

// Index of the dimension spec splits in a tensor of `rank` dimensions (0 for Replicated).
int shard_split_dim(const ShardSpec& spec, int tensor_rank);

// Rank spec.rank's segments of a split dimension of `size`. Throws InputError, with the numbers,
// when the parts do not add up to size or a part's heads do not divide by (or, replicated, into)
// the world size. For Replicated: one segment, the whole dimension.
std::vector<ShardSegment> shard_segments(int64_t size, const ShardSpec& spec);

// Rank spec.rank's slice of the tensor formed by concatenating `parts` along dim 0 (a fused weight
// as its checkpoint tensors: q, k, v), copied into a new host tensor. Only the slice is read, so a
// rank touches about 1/world of a memory-mapped checkpoint. Parts share dtype and trailing dims.
// Replicated with one part returns that part itself (no copy).
Tensor shard_slice(const std::vector<Tensor>& parts, const ShardSpec& spec);
inline Tensor shard_slice(const Tensor& full, const ShardSpec& spec) { return shard_slice(std::vector{full}, spec); }

// The inverse: slices[r] is rank r's slice under `spec` with rank r (spec.rank is ignored); returns
// the full tensor. Replicated heads (and Replicated tensors) must be equal on every rank that holds
// them (checked).
Tensor shard_reassemble(const std::vector<Tensor>& slices, const ShardSpec& spec);

// shard_slice for a quantized weight (the parts already fused, quant::concat_rows): the rows
// (Column, Vocab) or the columns (Row) of rank spec.rank's segments. A row split may cut a
// quantization group: each rank then holds its part of the group, with the group's scale and offset
// (quant::select_columns), and the all-reduce adds the parts' products. Replicated: w itself.
quant::GroupAffineWeight shard_quantized(const quant::GroupAffineWeight& w, const ShardSpec& spec);
// The same, w moved to the result when the rank's slice is all of it (shard_is_whole).
quant::GroupAffineWeight shard_quantized(quant::GroupAffineWeight&& w, const ShardSpec& spec);
// Whether rank spec.rank's segments of a split dimension of `size` are all of it, in order (one
// rank, or Replicated); the segments' checks (shard_segments) apply.
bool shard_is_whole(int64_t size, const ShardSpec& spec);

}  // namespace llmctl
