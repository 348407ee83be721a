// ModelRunner: what a Model needs per device and per step. It owns the step buffers (grown on
// demand), the paged KV cache, the CUDA graphs of decode steps (buckets and padding:
// decode_graphs.h), GEMM tuning at start-up, and the once-per-step attention plan handed to every
// layer. One runner per model and KV cache; several runners may share a model (each has its own
// buffers, cache and graph keys).
//
// KV cache: none -> allocated (alloc_kv_cache; a second call replaces the first) -> none (free_kv_cache).
#pragma once
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/kv/kv_cache_spec.h"
#include "engine/model/model.h"
#include "engine/sample/step_sampling.h"

namespace llmctl {

// Pipeline-parallel switches, for measurements (--pp-micro-batches, --pp-steps-in-flight); 0 leaves
// each to the runner and the executor.
struct PipelineOptions {
  int micro_batches = 0;    // micro-batches a step is cut into (1: none)
  int steps_in_flight = 0;  // steps submitted before the oldest is collected (1: one at a time)
};

class ModelRunner {
 public:
  // kv: the cache kv_spec() describes (--kv-cache-dtype); the backend must support its dtype.
  explicit ModelRunner(Model& model, KvCacheOptions kv = {}, PipelineOptions pp = {});
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  Model& model() const { return model_; }
  const PipelineOptions& pipeline_options() const { return pp_; }
  Backend& backend() const { return model_.backend(); }

  // The cache layout this runner allocates: auto = the backend's activation dtype, no scales; int8
  // and fp8 as engine/kv/kv_cache_spec.h describes.
  KvCacheSpec kv_spec(int block_size) const;
  // One KvLayer per layer, of layout.num_blocks[g] blocks of spec.block_size tokens for a layer of
  // group g (KvCacheLayout::group_of its window), plus one scratch block (id num_blocks[g]) that
  // padded graph rows write to and no request owns. Fp8 caches take the model's calibrated k/v
  // scales (Model::kv_scales), 1.0 where it has none.
  void alloc_kv_cache(const KvCacheSpec& spec, const KvCacheLayout& layout);
  std::vector<KvLayer>& kv_cache() { return kv_; }
  // Frees the cache (allocated -> none); graphs captured with it are dropped.
  void free_kv_cache();
  // Copy-on-write: block dst of every layer of KV group `group` becomes a copy of block src.
  void copy_blocks(const std::vector<std::pair<int, int>>& pairs, int group);

  // Device memory the activations of a step of `tokens` tokens and `rows` logits rows take.
  size_t activation_bytes(int64_t tokens, int64_t rows) const;
  // On a device backend: runs every linear shape of a step at each power-of-two token count up to
  // max_tokens (the lm_head up to max_rows), so that GEMM algorithms are measured at start-up and
  // not inside the first steps. No-op on the CPU.
  void tune_gemms(int64_t max_tokens, int64_t max_rows);

  // One step over the KV cache. Returns f32 logits [plan.logits_rows.size(), vocab] on the
  // backend's device: a view of a buffer the next step overwrites. Decode-only steps on a backend
  // with graphs are padded to a bucket of sequences and replayed from a graph.
  Tensor execute(const BatchPlan& plan);
  // Pipeline parallel, rank 0 (the first stage) with steps in flight: submit runs this stage's
  // part of a step (sending its activations on to the next stage) and starts receiving its logits
  // from the last stage; collect waits for the oldest submitted step's logits (host f32 [R, vocab],
  // its own buffer) and returns them. Steps go through every stage in submission order.
  void submit(const BatchPlan& plan);
  Tensor collect();
  // A step's draws and prompt rows from its logits (execute's or collect's), on this runner's
  // backend: engine/sample/step_sampler.h.
  StepOutput sample(const Tensor& logits, const StepSampling& sampling);
  int num_submitted() const { return int(submitted_.size()); }
  // With steps in flight, a step is worth cutting into micro-batches only from this many tokens a
  // stage (below, the executor sends it with BatchPlan::micro_batches = 1).
  static constexpr int kMicroBatchTokensInFlight = 64;

 private:
  // Pipeline parallel: a step of tokens >= kMicroBatchTokens x stages (decode steps included) is cut
  // into micro-batches of whole sequences that follow each other through the stages
  // (Model::pipeline_stages), so the stages overlap.
  static constexpr int kMicroBatchTokens = 8;
  int micro_batches(const BatchPlan& plan) const;
  // This rank's part of a pipelined step, micro-batch by micro-batch; returns the logits rows.
  int64_t run_micro_batches(const BatchPlan& plan);
  void check_plan(const BatchPlan& plan) const;  // throws Error for a plan this cache cannot run
  // Room for the plan's exact KV slots (Backend::reserve_exact_slots), then its fork copies.
  void prepare_exact_slots(const BatchPlan& plan);
  struct Submitted {
    Tensor logits;       // host f32 [R, vocab], filled by the last stage
    int64_t handle = -1;  // Model::post_collect_logits
  };
  std::deque<Submitted> submitted_;
  void ensure_workspace(int64_t T, int64_t R);
  // The per-step facts every layer reads, derived once. window: the plan's window view, where it has
  // window tables.
  AttentionPlan plan_attention(const DeviceBatch& b, const DeviceBatch* window, int64_t T, int64_t R) const;
  // Forward of one plan (a step, or a micro-batch of one) into `buf`; replayed from the graph of key
  // `graph` where given.
  void forward(const BatchPlan& plan, int64_t T, int64_t R, StepBuffers& buf,
               std::optional<uint64_t> graph = std::nullopt);
  int pool_blocks(int group) const;  // blocks of the group's pool, the scratch block included

  Model& model_;
  KvCacheDtype kv_dtype_;
  PipelineOptions pp_;
  bool fp8_exact_open_block_;
  ActivationWidths widths_;
  StepBuffers ws_;
  int64_t ws_tokens_ = 0, ws_rows_ = 0;
  std::vector<KvLayer> kv_;
  KvCacheLayout kv_layout_;
  std::vector<int> kv_group_;  // per local layer: its KV group
  // In every graph key: a runner never replays a graph captured by another (graphs of a runner
  // gone stay unreplayed until the next clear_graphs, e.g. the next runner's workspace).
  uint64_t graph_epoch_;
  std::vector<const void*> graph_kv_;  // the KV cache (every layer's k and v) the graphs were captured with
};

}  // namespace llmctl
