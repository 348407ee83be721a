// Stage 2's plan for the Llama family: Megatron's tensor-parallel split of each weight role.
//   qkv, gate_up (and qkv_bias): column-parallel by heads, per fused part; KV heads are split
//     across ranks, or replicated (rank r holds kv head r * Hkv / world) when Hkv < world;
//   o, down: row-parallel (their inputs are the column-parallel outputs; one all-reduce each);
//   embed, lm_head: vocab-parallel (rows by token id ranges; logits all-gathered);
//   norms: replicated.
// A row-parallel bias (none in the Llama family) is not split: it is added once, after the
// all-reduce. A quantized row-parallel weight may split inside a quantization group: each rank
// keeps the group's scale for its part (shard_quantized in shard.h).
// World 1 gives Replicated for every role, so a single rank shares the checkpoint's memory as before.
#pragma once
#include "engine/backend/linear_weight.h"
#include "engine/model/config.h"
#include "engine/model/weights/weight_source.h"

namespace llmctl {

ShardSpec megatron_shard(WeightRole role, const ModelConfig& c, int rank, int world);

// Refuses, before any weight is read, a world size that the config's query heads, KV heads,
// intermediate size or vocabulary does not divide: InputError with the numbers.
void check_tensor_parallel(const ModelConfig& c, int world);

// Refuses, before any weight is read, a number of pipeline stages that does not divide the
// layers: InputError with the numbers.
void check_pipeline_parallel(const ModelConfig& c, int stages);

}  // namespace llmctl
