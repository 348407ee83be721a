// The gated MLP of a decoder layer (SwiGLU, or GeGLU with the tanh GELU: Gemma): fused gate/up
// linear -> act(gate) * up -> down.
//
//   x [T, H] -> gate_up [T, 2I] -> act [T, I] -> out [T, H]
#pragma once
#include "engine/backend/backend.h"
#include "engine/core/error.h"

namespace llmctl {

struct GatedMlp {
  LinearWeight gate_up;  // [2I, H]: gate_proj then up_proj
  LinearWeight down;     // [H, I]
  bool gelu_tanh = false;  // GeGLU (hidden_act gelu_pytorch_tanh) instead of SwiGLU

  // gate_up_buf and act_buf are scratch of the step, at least [T, 2I] and [T, I] elements (a model
  // whose MLPs differ in width, e.g. experts and a shared expert, gives each the widest).
  void run(Backend& be, const Tensor& x, const Tensor& gate_up_buf, const Tensor& act_buf, Tensor& out) const {
    const int64_t T = x.dim(0);
    Tensor gu = scratch(gate_up_buf, T, gate_up.n), act = scratch(act_buf, T, down.k);
    be.linear(x, gate_up, nullptr, gu);
    activate(be, gu, act);
    be.linear(act, down, nullptr, out);
  }
  // act [T, I] = act(gate) * up of gu [T, 2I]: SwiGLU or GeGLU.
  void activate(Backend& be, const Tensor& gu, Tensor& act) const {
    if (gelu_tanh)
      be.gelu_tanh_mul(gu, act);
    else
      be.silu_mul(gu, act);
  }
  // buf's storage as a contiguous [rows, width] tensor.
  static Tensor scratch(const Tensor& buf, int64_t rows, int64_t width) {
    LLM_CHECK(rows * width <= buf.numel()) << "MLP scratch of " << buf.numel() << " elements, [" << rows << ", " << width
                                           << "] needed";
    Tensor v = buf;
    v.shape = {rows, width};
    return v;
  }
  // The two linears once at x's row count (GEMM tuning).
  void run_linears(Backend& be, const Tensor& x, Tensor& gate_up_buf, const Tensor& act_buf, Tensor& out) const {
    be.linear(x, gate_up, nullptr, gate_up_buf);
    be.linear(act_buf, down, nullptr, out);
  }
};

}  // namespace llmctl
