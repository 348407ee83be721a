// LocalExecutor: a single rank in this process, one ModelRunner over one Model.
#pragma once
#include "engine/executor/executor.h"
#include "engine/model/model.h"
#include "engine/runner/model_runner.h"

namespace llmctl {

class LocalExecutor final : public Executor {
 public:
  explicit LocalExecutor(Model& model, KvCacheOptions kv = {}, PipelineOptions pp = {}) : runner_(model, kv, pp) {}

  ModelRunner& runner() { return runner_; }
  const ModelRunner& runner() const { return runner_; }

  const ModelConfig& config() const override { return runner_.model().config(); }
  DType weight_dtype() const override { return runner_.model().weight_dtype(); }
  void check_context(int context) const override { runner_.model().check_context(context); }
  KvCacheSpec kv_spec(int block_size) const override { return runner_.kv_spec(block_size); }
  // The cache this budget is for replaces any earlier one: that one is freed first, or a second
  // engine on this executor would find the first one's blocks in use.
  std::optional<size_t> kv_cache_budget(double gpu_memory_utilization, size_t reserve) override {
    runner_.free_kv_cache();
    return runner_.backend().kv_cache_budget(gpu_memory_utilization, reserve);
  }
  size_t activation_bytes(int64_t tokens, int64_t rows) const override {
    return runner_.activation_bytes(tokens, rows);
  }
  void tune(int64_t max_tokens, int64_t max_rows) override { runner_.tune_gemms(max_tokens, max_rows); }
  bool host_free_during_forward() const override { return runner_.backend().device() != Device::CPU; }
  void copy_blocks(const std::vector<std::pair<int, int>>& pairs, int group = 0) override {
    runner_.copy_blocks(pairs, group);
  }

 protected:
  void do_alloc_kv_cache(const KvCacheSpec& spec, const KvCacheLayout& layout) override {
    runner_.alloc_kv_cache(spec, layout);
  }
  Tensor forward(const BatchPlan& plan) override { return runner_.execute(plan); }
  StepOutput sample(const Tensor& logits, const StepSampling& sampling) override {
    return runner_.sample(logits, sampling);
  }
  Tensor to_host(const Tensor& logits) override { return runner_.backend().to_host_f32(logits); }
  void step_timer_begin() override { runner_.backend().step_timer_begin(); }
  double step_timer_end() override { return runner_.backend().step_timer_end(); }
  uint64_t step_weight_bytes() override { return runner_.backend().take_weight_bytes(); }

 private:
  ModelRunner runner_;
};

}  // namespace llmctl
