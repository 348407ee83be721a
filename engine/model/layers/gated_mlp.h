// The gated MLP of a decoder layer (SwiGLU, or GeGLU with the tanh GELU: Gemma): fused gate/up
// linear -> act(gate) * up -> down.
//
//   x [T, H] -> gate_up [T, 2I] -> act [T, I] -> out [T, H]
#pragma once
#include "engine/backend/backend.h"

namespace llmctl {

struct GatedMlp {
  LinearWeight gate_up;  // [2I, H]: gate_proj then up_proj
  LinearWeight down;     // [H, I]
  bool gelu_tanh = false;  // GeGLU (hidden_act gelu_pytorch_tanh) instead of SwiGLU

  // gate_up_buf and act_buf are scratch of the step ([T, ...] views).
  void run(Backend& be, const Tensor& x, Tensor& gate_up_buf, Tensor& act_buf, Tensor& out) const {
    be.linear(x, gate_up, nullptr, gate_up_buf);
    if (gelu_tanh)
      be.gelu_tanh_mul(gate_up_buf, act_buf);
    else
      be.silu_mul(gate_up_buf, act_buf);
    be.linear(act_buf, down, nullptr, out);
  }
  // The two linears once at x's row count (GEMM tuning).
  void run_linears(Backend& be, const Tensor& x, Tensor& gate_up_buf, const Tensor& act_buf, Tensor& out) const {
    be.linear(x, gate_up, nullptr, gate_up_buf);
    be.linear(act_buf, down, nullptr, out);
  }
};

}  // namespace llmctl
