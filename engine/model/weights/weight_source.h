// Stage 1 of weight loading, the name map: a model family lists its logical weights, each made of
// one or more checkpoint tensors (fused along dim 0 in the listed order), with the role that
// decides how tensor parallelism splits it (megatron_split.h) and how it is stored.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace llmctl {

enum class WeightRole : uint8_t {
  Embed,      // [V, H] token embedding table
  LmHead,     // [V, H] output projection (a linear; the embedding itself when tied)
  Norm,       // [H] RMSNorm weight (model.norm, input/post-attention layernorms)
  Qkv,        // [(Hq + 2*Hkv) * D, H] fused q/k/v projection
  QkvBias,    // [(Hq + 2*Hkv) * D] its bias (Qwen2)
  O,          // [H, Hq * D] attention output projection
  GateUp,     // [2 * I, H] fused gate/up projection
  Down,       // [H, I] MLP down projection
  // Mixture of experts (engine/model/layers/moe_block.h)
  Router,        // [E, H] the router (replicated under tensor parallelism)
  ExpertGateUp,  // [2 * I_moe, H] one expert's fused gate/up projection
  ExpertDown,    // [H, I_moe] one expert's down projection
  SharedGateUp,  // [2 * I_shared, H] the shared expert's (Qwen2-MoE)
  SharedDown,    // [H, I_shared]
  SharedGate,    // [1, H] the shared expert's gate (replicated)
};
const char* weight_role_name(WeightRole r);
// A linear layer's weight (loaded as a LinearWeight) rather than a table, norm or bias.
bool is_linear_role(WeightRole r);

struct WeightSource {
  std::string name;                // logical name: "embed", "lm_head", "layers.3.qkv", "layers.3.input_norm"
  WeightRole role = WeightRole::Norm;
  int layer = -1;                  // -1 outside the layers
  std::vector<std::string> parts;  // checkpoint (HF) tensor names, fused along dim 0 in this order
  bool tied = false;               // lm_head reusing the embedding: a loader may share its device copy
  int expert = -1;                 // ExpertGateUp / ExpertDown: which expert
};

}  // namespace llmctl
