#include "engine/model/weights/weight_source.h"

namespace llmctl {

const char* weight_role_name(WeightRole r) {
  switch (r) {
    case WeightRole::Embed: return "embed";
    case WeightRole::LmHead: return "lm_head";
    case WeightRole::Norm: return "norm";
    case WeightRole::Qkv: return "qkv";
    case WeightRole::QkvBias: return "qkv_bias";
    case WeightRole::O: return "o";
    case WeightRole::GateUp: return "gate_up";
    case WeightRole::Down: return "down";
  }
  return "unknown";
}

bool is_linear_role(WeightRole r) {
  return r == WeightRole::LmHead || r == WeightRole::Qkv || r == WeightRole::O || r == WeightRole::GateUp ||
         r == WeightRole::Down;
}

}  // namespace llmctl
