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
    case WeightRole::Router: return "router";
    case WeightRole::ExpertGateUp: return "expert_gate_up";
    case WeightRole::ExpertDown: return "expert_down";
    case WeightRole::SharedGateUp: return "shared_gate_up";
    case WeightRole::SharedDown: return "shared_down";
    case WeightRole::SharedGate: return "shared_gate";
  }
  return "unknown";
}

bool is_linear_role(WeightRole r) {
  return r != WeightRole::Embed && r != WeightRole::Norm && r != WeightRole::QkvBias;
}

}  // namespace llmctl
