#include "engine/model/weights/megatron_split.h"

#include "engine/core/error.h"
#include "engine/model/weights/shard.h"

namespace llmctl {

ShardSpec megatron_shard(WeightRole role, const ModelConfig& c, int rank, int world) {
  LLM_REQUIRE(world >= 1) << "tensor-parallel size must be at least 1, got " << world;
  LLM_CHECK(rank >= 0 && rank < world) << "rank " << rank << " of " << world;
  ShardSpec s;
  s.rank = rank;
  s.world = world;
  if (world == 1) return s;  // Replicated
  const int64_t I = c.intermediate_size;
  switch (role) {
    case WeightRole::Norm: break;
    case WeightRole::Embed:
    case WeightRole::LmHead:
      s.kind = ShardKind::Vocab;
      s.parts = {{c.vocab_size, "vocabulary entries"}};
      break;
    case WeightRole::Qkv:
    case WeightRole::QkvBias:
      s.kind = ShardKind::Column;
      s.head_size = c.head_dim;
      s.parts = {{c.num_heads, "query heads"},
                 {c.num_kv_heads, "key/value heads", true},
                 {c.num_kv_heads, "key/value heads", true}};
      break;
    case WeightRole::O:
      s.kind = ShardKind::Row;
      s.head_size = c.head_dim;
      s.parts = {{c.num_heads, "query heads"}};
      break;
    case WeightRole::GateUp:
      s.kind = ShardKind::Column;
      s.parts = {{I, "MLP intermediate features"}, {I, "MLP intermediate features"}};
      break;
    case WeightRole::Down:
      s.kind = ShardKind::Row;
      s.parts = {{I, "MLP intermediate features"}};
      break;
    // Experts: every rank holds a slice of every expert (its intermediate features), as a dense
    // MLP's; the router and the shared expert's gate are replicated.
    case WeightRole::Router:
    case WeightRole::SharedGate: break;
    case WeightRole::ExpertGateUp:
    case WeightRole::SharedGateUp: {
      const int64_t n = role == WeightRole::ExpertGateUp ? c.moe_intermediate_size : c.shared_expert_intermediate_size;
      s.kind = ShardKind::Column;
      s.parts = {{n, "expert intermediate features"}, {n, "expert intermediate features"}};
      break;
    }
    case WeightRole::ExpertDown:
    case WeightRole::SharedDown:
      s.kind = ShardKind::Row;
      s.parts = {{role == WeightRole::ExpertDown ? c.moe_intermediate_size : c.shared_expert_intermediate_size,
                  "expert intermediate features"}};
      break;
  }
  return s;
}

void check_tensor_parallel(const ModelConfig& c, int world) {
  const int64_t qkv = int64_t(c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  // The split dimension of each role, in the order a user would fix them.
  const std::pair<WeightRole, int64_t> dims[] = {{WeightRole::Qkv, qkv},
                                                 {WeightRole::O, int64_t(c.num_heads) * c.head_dim},
                                                 {WeightRole::GateUp, 2 * int64_t(c.intermediate_size)},
                                                 {WeightRole::Down, c.intermediate_size},
                                                 {WeightRole::Embed, c.vocab_size}};
  for (const auto& [role, size] : dims) (void)shard_segments(size, megatron_shard(role, c, 0, world));
  if (c.num_experts > 0)
    (void)shard_segments(c.moe_intermediate_size, megatron_shard(WeightRole::ExpertDown, c, 0, world));
  if (c.shared_expert_intermediate_size > 0)
    (void)shard_segments(c.shared_expert_intermediate_size, megatron_shard(WeightRole::SharedDown, c, 0, world));
}

void check_pipeline_parallel(const ModelConfig& c, int stages) {
  LLM_REQUIRE(stages >= 1) << "pipeline-parallel size must be at least 1, got " << stages;
  LLM_REQUIRE(c.num_layers % stages == 0)
      << "cannot split " << c.num_layers << " layers over " << stages << " pipeline stages: " << c.num_layers
      << " is not a multiple of " << stages;
}

}  // namespace llmctl
