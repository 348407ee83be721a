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
// A layer may also be probed (AWQ's scale search): run again on the same input with trial weights,
// handing nothing on, its linears computed only up to a given one.
//
// Per layer: begin_layer(i) -> probe(...)* -> advance(...); layers in order 0, 1, ..., each once.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/checkpoint.h"
#include "engine/model/model.h"
#include "quant/algo/dense_layer.h"

namespace llmctl {
class LoopbackComm;
}

namespace llmctl::quant {

// A decoder layer's linears by their input: q/k/v (fused rows q, k, v), o, gate/up (rows gate, up), down.
enum class LinearGroup { Qkv = 0, O = 1, GateUp = 2, Down = 3 };

// Where a linear sits: its group and, in a mixture-of-experts layer's MLP, its expert (a routed
// expert's index, or kSharedExpert); kNoExpert for attention and dense MLPs. A routed expert's
// linears see only the rows of the tokens routed to it, and do not run when no token is.
inline constexpr int kNoExpert = -1;
struct LinearSite {
  LinearGroup group = LinearGroup::Qkv;
  int expert = kNoExpert;
  bool operator==(const LinearSite&) const = default;
};

class FamilyCalibration {
 public:
  // samples: S token sequences of one length L (ids in the vocabulary); threads: the CPU backend's
  // (0: every core).
  FamilyCalibration(const Checkpoint& ck, const std::vector<std::vector<int32_t>>& samples, int threads = 0);
  ~FamilyCalibration();

  int64_t tokens() const { return int64_t(plan_.token_ids.size()); }

  // before(site, x, w): x [T, K] the linear's input (valid during the call; a routed expert's: its
  // tokens' rows), w [N, K] its f32 weight as loaded; returns the weight [N, K] f32 to run instead,
  // or an empty Tensor to run w.
  using BeforeLinear = std::function<Tensor(LinearSite site, const Tensor& x, const Tensor& w)>;

  // Builds layer `layer` (the next one) alone, its weights loaded in f32.
  void begin_layer(int layer);
  // Runs the built layer over its input and hands its output to the next layer. amax (may be null):
  // the maxima per kv head of the rotated keys and the values the layer writes to its cache.
  void advance(const BeforeLinear& before, KvAbsMax* amax = nullptr);
  // Runs the built layer over its input and keeps that input for the next run, up to group `last`:
  // before sees last's input, and neither last's linear nor what follows is computed. attention: Record keeps the layer's attention and o outputs (before must swap nothing
  // up to o); Replay uses the kept ones instead of computing q/k/v, the attention and o again (a
  // probe of the MLP half: before may swap gate/up only).
  enum class ProbeAttention { Compute, Record, Replay };
  void probe(const BeforeLinear& before, LinearGroup last, ProbeAttention attention = ProbeAttention::Compute);
  // begin_layer, then advance.
  void run_layer(int layer, const BeforeLinear& before, KvAbsMax* amax = nullptr);

  // The built layer's weight at `site` as loaded (f32 [N, K]; q, k, v rows fused, gate and up too).
  const Tensor& weight(LinearSite site) const;
  // x [T, K] @ w [N, K]^T, f32, on the calibration backend.
  Tensor linear(const Tensor& x, const Tensor& w);

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
  std::unique_ptr<Model> layer_;  // the built layer
  int layer_index_ = -1;
  void run(const BeforeLinear& before, KvAbsMax* amax, int stop_group, int attention);
  std::vector<LinearSite> sites() const;  // the built layer's linears
  void allocate_buffers(const ActivationWidths& w);
};

}  // namespace llmctl::quant
