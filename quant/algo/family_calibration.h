// The calibration forward of quantize: the checkpoint's own model (its family's forward, made by the
// registry) run over the whole calibration batch, one layer at a time, with each linear's input
// shown to the quantizer before the linear runs.
//
// Layer i is built alone, as the one-layer stage i of an in-process pipeline (LoopbackComm): only its
// weights are loaded (f32), it runs the batch (S samples of L tokens) as one prefill step, and its
// output (hidden, residual) waits for layer i + 1. Inside the layer the linears run in the family's
// order; before each, the observer sees its input and may swap in the weight to run with (GPTQ's
// quantized values, so the next linear's input comes from the quantized ones before it: true-
// sequential). The window, norms, soft-capping and rope of the family apply as they do at inference.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/checkpoint.h"
#include "engine/model/model.h"
#include "quant/algo/calibration_forward.h"

namespace llmctl {
class LoopbackComm;
}

namespace llmctl::quant {

// A decoder layer's linears by their input: q/k/v (fused rows q, k, v), o, gate/up (rows gate, up), down.
enum class LinearGroup { Qkv = 0, O = 1, GateUp = 2, Down = 3 };

class FamilyCalibration {
 public:
  // samples: S token sequences of one length L (ids in the vocabulary); threads: the CPU backend's
  // (0: every core).
  FamilyCalibration(const Checkpoint& ck, const std::vector<std::vector<int32_t>>& samples, int threads = 0);
  ~FamilyCalibration();

  int64_t tokens() const { return int64_t(plan_.token_ids.size()); }

  // Runs layer `layer` over the batch; layers must run in order 0, 1, ..., num_layers - 1, each once.
  // before(group, x, w): x [T, K] the linear's input, w [N, K] its f32 weight as loaded; returns the
  // weight [N, K] f32 to run instead, or an empty Tensor to run w. amax (may be null): the maxima per
  // kv head of the rotated keys and the values the layer writes to its cache.
  using BeforeLinear = std::function<Tensor(LinearGroup group, const Tensor& x, const Tensor& w)>;
  void run_layer(int layer, const BeforeLinear& before, KvAbsMax* amax = nullptr);

 private:
  class Observer;
  const Checkpoint& ck_;
  std::unique_ptr<Backend> cpu_;
  std::unique_ptr<Observer> observer_;
  std::unique_ptr<LoopbackComm> comm_;
  BatchPlan plan_;
  DeviceBatch batch_;
  StepBuffers buffers_;
  std::vector<KvLayer> kv_;
  int next_layer_ = 0;
};

}  // namespace llmctl::quant
