// RMSNorm with an optional fused residual add (Backend::rms_norm): the weight is f32 on the device.
#pragma once
#include "engine/backend/backend.h"

namespace llmctl {

struct RmsNorm {
  Tensor weight;  // [H] f32
  float eps = 1e-5f;

  // Without residual: out = rmsnorm(x) * w. With: *residual += x; out = rmsnorm(*residual) * w.
  void operator()(Backend& be, const Tensor& x, Tensor& out, Tensor* residual = nullptr) const {
    be.rms_norm(x, weight, eps, out, residual);
  }
};

}  // namespace llmctl
