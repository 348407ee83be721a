// Executor: the one door between the Engine (and Scorer) and the model's ranks. The engine hands
// it a step's BatchPlan with the step's StepSampling and gets the step's tokens back (StepOutput):
// the forward and the sampling both happen below it (sampling in the runner, on the backend that
// holds the logits: engine/sample/step_sampler.h), so the engine never sees a logits tensor. It
// also asks it for what surrounds a step (KV cache size and allocation, copy-on-write block
// copies). LocalExecutor runs one rank in this process; a multi-rank executor (tensor / pipeline
// parallel) sends each plan to its ranks behind the same calls, so the engine never reaches past
// it to a Backend or a Model.
//
// Lifecycle: constructed -> alloc_kv_cache() -> execute()* (a new alloc_kv_cache replaces the cache).
#pragma once
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/kv/kv_cache_spec.h"
#include "engine/model/config.h"
#include "engine/sample/step_sampling.h"

namespace llmctl {

class Executor {
 public:
  virtual ~Executor() = default;

  virtual const ModelConfig& config() const = 0;
  virtual DType weight_dtype() const = 0;
  // Throws InputError when the model cannot run `context` tokens exactly (sliding windows).
  virtual void check_context(int context) const = 0;

  // KV cache: its layout for a block size, the bytes a device may give it (nullopt without a
  // device: the caller's size applies) after `reserve` bytes for activations, and its allocation.
  // Asking for the budget frees the cache allocated before (the new one replaces it).
  virtual KvCacheSpec kv_spec(int block_size) const = 0;
  virtual std::optional<size_t> kv_cache_budget(double gpu_memory_utilization, size_t reserve) = 0;
  void alloc_kv_cache(const KvCacheSpec& spec, const KvCacheLayout& layout) {
    do_alloc_kv_cache(spec, layout);
    ++kv_cache_epoch_;
  }
  // Counts allocations: a user sharing the executor (a Scorer beside an Engine) sees when the cache
  // it allocated was replaced by another one's.
  uint64_t kv_cache_epoch() const { return kv_cache_epoch_; }
  // Device memory the activations of a step of `tokens` tokens and `rows` logits rows take.
  virtual size_t activation_bytes(int64_t tokens, int64_t rows) const = 0;
  // Start-up measurement of the step's GEMMs up to these sizes (device backends).
  virtual void tune(int64_t max_tokens, int64_t max_rows) = 0;
  // Copy-on-write: for each (src, dst), block dst of every layer of KV group `group` becomes a copy
  // of block src.
  virtual void copy_blocks(const std::vector<std::pair<int, int>>& pairs, int group = 0) = 0;

  // One step: the forward of the plan's tokens, then every draw and prompt row of `sampling` from
  // its logits rows (sampling.draws' states get their tokens appended). device_seconds is measured.
  StepOutput execute(const BatchPlan& plan, const StepSampling& sampling);
  // The step's logits rows [plan.logits_rows.size(), vocab] copied to the host as f32 (kept across
  // steps): for scoring, which needs whole rows (Scorer).
  Tensor execute_to_host(const BatchPlan& plan);
  // Steps in flight (pipeline parallelism): up to max_steps_in_flight() steps may be submitted
  // before the oldest is collected, so that the first stage starts a step while later stages
  // still work on earlier ones. Steps complete in submission order; collect() returns the oldest
  // one's output, its draws made when it is collected (the states and params `sampling` points to
  // stay valid until then). The steps in flight must not share a sequence (each reads the KV the
  // previous step of that sequence wrote). Default: one at a time, submit runs execute.
  virtual int max_steps_in_flight() const { return 1; }
  // Whether the host's cores are free while a step's forward runs (a GPU forward): then work for the
  // step's sampling (grammar masks) runs beside it; on the CPU backend the forward uses every core.
  virtual bool host_free_during_forward() const { return false; }
  virtual void submit(const BatchPlan& plan, const StepSampling& sampling);
  virtual StepOutput collect();

 protected:
  virtual void do_alloc_kv_cache(const KvCacheSpec& spec, const KvCacheLayout& layout) = 0;
  // The parts of a step: the forward (f32 logits rows on the device, a buffer the next forward
  // overwrites), sampling from them (sample_step on the backend that holds them), a copy to the
  // host, and the device time between the timer's calls (0 where not measured).
  virtual Tensor forward(const BatchPlan& plan) = 0;
  virtual StepOutput sample(const Tensor& logits, const StepSampling& sampling) = 0;
  virtual Tensor to_host(const Tensor& logits) = 0;
  virtual void step_timer_begin() = 0;
  virtual double step_timer_end() = 0;
  // The weight bytes the backend's linears read since the last call (Backend::take_weight_bytes).
  virtual uint64_t step_weight_bytes() { return 0; }

 private:
  std::optional<StepOutput> submitted_;  // the default submit's output, until collect()
  uint64_t kv_cache_epoch_ = 0;      // alloc_kv_cache calls so far
};

}  // namespace llmctl
