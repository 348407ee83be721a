// Model: one architecture's decoder, written against the Backend. It owns its weights (uploaded to
// its backend) and enqueues one step's forward into buffers the runner owns (engine/runner/):
// embeds -> layers -> final norm -> logits rows. Instances come from the registry
// (engine/model/registry.h), keyed on ModelConfig::architecture.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/config.h"
#include "engine/model/kv_scales.h"
#include "engine/model/weight_spec.h"

namespace llmctl {


// Widths (elements per token / per logits row) of the step buffers a model writes: this rank's
// share under tensor parallelism (qkv, attn, gate_up, act; vocab_local for its lm_head shard),
// except hidden and vocab (the full logits rows every rank gathers).
struct ActivationWidths {
  int64_t hidden = 0, qkv = 0, attn = 0, gate_up = 0, act = 0, vocab = 0;
  int64_t vocab_local = 0;  // 0: vocab (no vocab split)
  int64_t experts = 0;      // > 0: mixture-of-experts scratch (router [T, experts], expert rows below)
  int64_t expert_slots = 0;   // routed experts per token (top k): each token's rows in the expert buffers
  int64_t expert_gate_up = 0; // an expert's gate/up width (this rank's 2 I_moe)
};

// One step's activation buffers, allocated by the runner for at least T tokens and R rows; a
// model's forward uses the first T (R) rows. Dtypes: activation dtype, residual f32, logits f32.
struct StepBuffers {
  Tensor hidden, residual, normed, qkv, attn, gate_up, act;  // [T, width]
  Tensor last, logits;                                       // [R, H], [R, V]
  Tensor logits_local;  // [R, vocab_local] when the lm_head is vocab-parallel; else empty
  // Mixture-of-experts models (else empty): router [T, experts] f32; the routed rows, k per token
  // (ActivationWidths::expert_slots), grouped by expert: expert_in / expert_out [T, k H],
  // expert_gate_up [T, k 2I], expert_act [T, k I].
  Tensor router, expert_in, expert_out, expert_gate_up, expert_act;
};

// The per-step facts every layer's attention reads, derived once per step by the runner
// (FlashInfer's plan()/run() split): the device copy of the BatchPlan, the softmax scale and the
// step's sizes. Layers do not recompute them.
struct AttentionPlan {
  const DeviceBatch* batch = nullptr;
  // What sliding-window layers read when their KV has a pool of its own (the plan's window tables,
  // BatchPlan::window_view); null: they read `batch` as every layer does.
  const DeviceBatch* window_batch = nullptr;
  int64_t tokens = 0, rows = 0;  // T, R: rows of the step buffers in use
  float softmax_scale = 1.0f;
};

// A view of the first n rows of a buffer.
inline Tensor first_rows(const Tensor& t, int64_t n) {
  Tensor v = t;
  v.shape[0] = n;
  return v;
}

// A view of rows [begin, begin + n) of a buffer (a pipeline micro-batch's part of a step's buffer).
inline Tensor row_slice(const Tensor& t, int64_t begin, int64_t n) {
  Tensor v = t;
  v.shape[0] = n;
  v.data = static_cast<char*>(t.data) + begin * (t.nbytes() / size_t(t.dim(0)));
  return v;
}

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  virtual Backend& backend() const = 0;
  virtual DType weight_dtype() const = 0;  // the dtype the linear weights are kept in
  // Every checkpoint tensor the model reads, by name, with its shape.
  virtual std::vector<WeightSpec> weight_specs() const = 0;
  virtual ActivationWidths activation_widths() const = 0;
  // KV heads this rank's cache holds: config().num_kv_heads, or its share under tensor parallelism.
  virtual int kv_heads() const { return config().num_kv_heads; }
  // Layers this rank runs, and so holds KV for: config().num_layers, or its pipeline stage's share.
  virtual int num_local_layers() const { return config().num_layers; }
  // The attention window of local layer i (0: the whole context; config().layer_window of its layer).
  virtual int local_layer_window(int i) const { return config().layer_window(i); }
  // Throws InputError when the model cannot run `context` tokens exactly (a family whose attention
  // reads less than the context would say so here). Default: every context runs.
  virtual void check_context(int context) const { (void)context; }
  // The checkpoint's calibrated fp8 KV cache scales, one KvScales per layer (of this rank's
  // kv_heads()); empty when it has none.
  virtual std::vector<KvScales> kv_scales() const { return {}; }
  // Enqueues one step: buf.logits[0, plan.rows) = logits of the plan's logits rows. kv: one
  // KvLayer per local layer. Pipeline parallel: a stage takes its input from the previous one and
  // hands its output to the next; the last stage's logits reach rank 0 through collect_logits.
  virtual void forward(const AttentionPlan& plan, StepBuffers& buf, std::vector<KvLayer>& kv) = 0;
  // Pipeline parallel (stages > 1): the runner cuts a step of several sequences into micro-batches
  // that follow each other through the stages (stage s works on micro-batch i while stage s + 1
  // works on i - 1), then calls collect_logits once: the last stage sends the step's logits rows
  // to rank 0, which receives them into `logits` [R, V].
  virtual int pipeline_stages() const { return 1; }
  // The forward reads a device result on the host mid-step (a mixture of experts' routing): a
  // device backend cannot capture it in a graph.
  virtual bool syncs_in_forward() const { return false; }
  virtual void collect_logits(Tensor& logits) { (void)logits; }
  // collect_logits split in two, for rank 0 with several steps in flight: post_collect_logits
  // starts receiving into `logits` (which must stay valid) and returns at once with a handle (-1:
  // nothing to wait for, done already); finish_collect_logits(handle) waits for it. Default: the
  // blocking collect_logits.
  virtual int64_t post_collect_logits(Tensor& logits) {
    collect_logits(logits);
    return -1;
  }
  virtual void finish_collect_logits(int64_t handle) { (void)handle; }
  // Runs each distinct linear of a step once at T tokens (the lm_head at R rows, when R > 0):
  // what the runner times to tune GEMM algorithms. Reads and writes buf only.
  virtual void run_linears(StepBuffers& buf, int64_t T, int64_t R) = 0;
};

}  // namespace llmctl
