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
#include <memory>
#include <string>
#include <vector>

#include "engine/core/tensor.h"

namespace llmctl {

// How a weight's numbers are stored. The quantized formats are group-affine (kernels/cpu/qlinear.h):
//   w[n, k] = scale[n, g] * code[n, k] + offset[n, g],  g = k / group_size,
// which holds every layout llmctl reads exactly (compressed-tensors / AutoAWQ / GPTQ zero points:
// offset = -zero * scale; GGUF Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K: their block scales
// and mins expanded per group). Each backend packs the codes in its own layout at load.
enum class WeightFormat : uint8_t {
  DenseF32,   // data [N, K] f32
  DenseF16,   // data [N, K] f16
  DenseBF16,  // data [N, K] bf16
  Int4Group,  // codes 0..15; data: U8 packed by the backend (CPU: kernels::qweight_pack)
  Int8Group,  // codes -128..127 (5- and 6-bit GGUF codes too); data: I8/U8 packed likewise
};

const char* weight_format_name(WeightFormat f);  // "dense-f32", "int4-group", ...
bool is_dense(WeightFormat f);
// The shape every backend and the loader take an Int4Group / Int8Group weight in: the rule, once.
inline constexpr const char* kIntGroupRule = "group 16 or a multiple of 32 dividing K, K a multiple of 32";
bool int_group_shape_ok(int64_t k, int group_size);
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

// What a backend read from its own packed weight when it packed it (the CPU backend: each part's
// kernel view), so that a step's hundred linear calls do not parse the packed bytes again, each a
// few cold cache lines on the step's serial path. A backend derives its own; it describes the bytes
// at `data` alone (a weight whose data points elsewhere is read afresh).
struct PackedWeightView {
  const void* data = nullptr;  // the LinearWeight::data.data it was read from
  uint64_t bytes = 0;          // the weight's bytes: data, scales and zeros
  virtual ~PackedWeightView() = default;
};

struct LinearWeight {
  WeightFormat format = WeightFormat::DenseF32;
  int64_t n = 0, k = 0;  // this rank's logical [N, K] (the slice the op multiplies by)
  // Dense: [N, K] in dense_dtype(format). Between the pack and upload stages a dense host weight may
  // still be in its stored float dtype: Backend::upload converts it (on the device for CUDA, as the
  // loader always has). Quantized: the codes packed in the backend's layout (U8, [N, row bytes]).
  Tensor data;
  Tensor scales;        // quantized: [N, K / group_size] F16 or F32 (F16 only when every value is exact in it);
                        // a backend's packed weight may leave them empty (its data holds them)
  Tensor zeros;         // quantized: the offsets, [N, K / group_size], same dtype as scales; empty when dense
  int group_size = 0;   // quantized: inputs per group (divides K; 16 or a multiple of 32); 0: dense
  // Quantized act-order weights (quant::GroupAffineWeight::perm): I32 [K], packed column j is input
  // feature input_perm[j], so the op is x[:, input_perm] @ dequant(w)^T; the backend gathers x's
  // columns (BackendCaps::input_perm). Empty (no data): columns in input order (dense always).
  Tensor input_perm;
  // Quantized, canonical: the rows of the weights fused into this one (q, k, v; gate, up), in order,
  // when more than one (quant::GroupAffineWeight::part_rows). Their common form can be wider than
  // each part's own (a codebook part fused with a 5-bit one: 8-bit codes): a backend may pack each
  // part in its own. Empty: one part.
  std::vector<int64_t> part_rows;
  ShardSpec shard;      // the slice of the full weight held here (Replicated, world 1 without TP)
  std::shared_ptr<const PackedWeightView> packed_view;  // set by the backend that packed it, if it keeps one
};

// w.packed_view where it describes w's bytes, else null (a copy of w whose data points elsewhere).
inline const PackedWeightView* packed_view_of(const LinearWeight& w) {
  return w.packed_view && w.packed_view->data == w.data.data ? w.packed_view.get() : nullptr;
}

// An input_perm, if any, is a host I32 [K] permutation of 0..K-1 on a quantized weight; throws
// (internal error, naming the weight's format and the bad entry) otherwise. Backends call it on upload.
void check_input_perm(const LinearWeight& w);

}  // namespace llmctl
