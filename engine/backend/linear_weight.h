// A linear layer's weight with its storage format and, under tensor parallelism, which slice of
// the full weight this rank holds. Backend::linear(x, LinearWeight, ...) consumes it; the loading
// stages that make one live in engine/model/weights/ (name map -> shard -> pack -> upload).
//
// These are plain data types that the backend layer needs; they sit here, below engine/model/,
// because backend.h takes them (arrows point down).
//
// Shapes: N = output features (rows of W), K = input features, out[T, N] = x[T, K] @ W[N, K]^T.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/tensor.h"

namespace llmctl {

// How a weight's numbers are stored. Only the dense formats are implemented (every backend runs
// them); the quantized entries name the layouts the quantize issue adds, so that a backend can
// already answer supports() for them and a loader can refuse them by name.
enum class WeightFormat : uint8_t {
  DenseF32,   // data [N, K] f32
  DenseF16,   // data [N, K] f16
  DenseBF16,  // data [N, K] bf16
  Int4Group,  // not implemented: 4-bit values, scales/zeros per (row, group of group_size inputs)
  Int8Channel,  // not implemented: data [N, K] i8, scales [N] (one per output row)
  GgufBlocks,   // not implemented: GGUF quantized blocks as stored (Q4_0, Q8_0, K-quants, ...)
};

const char* weight_format_name(WeightFormat f);  // "dense-f32", "int4-group", ...
bool is_dense(WeightFormat f);
WeightFormat dense_format(DType t);  // F32/F16/BF16 -> Dense*; throws for other dtypes
DType dense_dtype(WeightFormat f);   // the inverse; throws for quantized formats

// Megatron-style tensor-parallel split of one weight (engine/model/weights/shard.h slices and
// reassembles by it).
//   Replicated: every rank holds the whole tensor (norms; world 1).
//   Column:     output rows (dim 0) split; ranks' outputs are concatenated (q/k/v, gate/up).
//   Row:        input columns (last dim) split; ranks' partial outputs are summed (o, down).
//   Vocab:      rows of an embedding table / lm_head split by token id ranges.
enum class ShardKind : uint8_t { Replicated, Column, Row, Vocab };
const char* shard_kind_name(ShardKind k);

// One part of a (possibly fused) weight along the split dimension: `heads` blocks of
// ShardSpec::head_size rows (or columns). A fused qkv [(Hq + 2*Hkv) * D, H] has three parts,
// {Hq, "query heads"}, {Hkv, "key/value heads", replicate}, {Hkv, ...}; gate_up [2I, H] has two
// parts of I one-row "heads".
struct ShardPart {
  int64_t heads = 0;
  std::string what;              // for messages: "query heads", "intermediate rows", ...
  bool replicate_if_fewer = false;  // KV heads: when heads < world, rank r holds head r * heads / world
};

struct ShardSpec {
  ShardKind kind = ShardKind::Replicated;
  int rank = 0, world = 1;
  int64_t head_size = 1;        // rows/columns that move together (head_dim for attention, 1 otherwise)
  std::vector<ShardPart> parts;  // along the split dim, in order; their heads * head_size sum to its size
};

struct LinearWeight {
  WeightFormat format = WeightFormat::DenseF32;
  int64_t n = 0, k = 0;  // this rank's logical [N, K] (the slice the op multiplies by)
  // Dense: [N, K] in dense_dtype(format). Quantized (not implemented): the format's packed layout.
  // Between the pack and upload stages a dense host weight may still be in its stored float
  // dtype: Backend::upload converts it (on the device for CUDA, as the loader always has).
  Tensor data;
  Tensor scales;        // quantized: [N, K / group_size] (group) or [N] (channel); empty when dense
  Tensor zeros;         // asymmetric quantized: like scales (layout per format); empty otherwise
  int group_size = 0;   // inputs per scale group; -1: one group per row; 0: dense
  Tensor g_idx;         // act-order: [K] i32, the group of each input column; empty: contiguous groups
  ShardSpec shard;      // the slice of the full weight held here (Replicated, world 1 without TP)
};

}  // namespace llmctl
