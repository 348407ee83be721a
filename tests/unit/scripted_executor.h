// ScriptedExecutor: an Executor with no model, so the Engine's logic (batching, forks, stops,
// aborts, drafts, preemption, prefix caching) is tested without one. Its "model" is a rule over
// what it reads back from its own KV cache: each step writes every token to its slot
// (plan.slot_mapping), then each logits row reads its sequence's context back through the block
// table and puts kPeak on the token the rule gives (0 elsewhere). So a step that reads another
// sequence's block, a stale one or a bad copy-on-write copy makes another token than the
// reference (next_token over the sequence's true tokens), and the outputs show it.
//   Rule::ContextHash  the next token depends on the whole context (position by position);
//   Rule::LastToken    it depends on the last token alone, so texts cycle (n-gram drafts hit).
// Sampling is the real one (sample_step on a CPU backend): greedy requests follow the rule.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/core/error.h"
#include "engine/executor/executor.h"
#include "engine/sample/step_sampler.h"
#include "tiny_config.h"

namespace llmctl::test {

class ScriptedExecutor final : public Executor {
 public:
  enum class Rule { ContextHash, LastToken };
  static constexpr float kPeak = 8.0f;
  // The rule makes ids [3, 256): never 0..2 (stop tests pick them) nor a tokenizer's specials.
  static constexpr int kFirstScriptToken = 3, kScriptEnd = 256;

  explicit ScriptedExecutor(int vocab, Rule rule = Rule::ContextHash) : rule_(rule) {
    config_ = tiny_llama_config(vocab, 1);
  }

  // The token after tokens[0..n) under the rule.
  int next_token(const std::vector<int32_t>& tokens) const {
    uint64_t h = 1469598103934665603ULL;
    if (rule_ == Rule::LastToken) {
      h ^= uint64_t(tokens.back()) * 0x9e3779b97f4a7c15ULL;
      h *= 1099511628211ULL;
    } else {
      for (int32_t t : tokens) h = (h ^ uint64_t(t + 1)) * 1099511628211ULL;
    }
    h ^= h >> 29;
    return kFirstScriptToken + int(h % uint64_t(std::min(config_.vocab_size, kScriptEnd) - kFirstScriptToken));
  }
  // The rule's continuation of a prompt, n tokens.
  std::vector<int> continuation(std::vector<int32_t> tokens, int n) const {
    std::vector<int> out;
    for (int i = 0; i < n; ++i) {
      out.push_back(next_token(tokens));
      tokens.push_back(out.back());
    }
    return out;
  }

  int64_t steps = 0, max_step_tokens = 0, copied_blocks = 0;

  const ModelConfig& config() const override { return config_; }
  // As a GPU executor: grammar masks are filled on their own thread while the forward runs.
  bool host_free = false;
  bool host_free_during_forward() const override { return host_free; }
  DType weight_dtype() const override { return DType::F32; }
  void check_context(int) const override {}
  KvCacheSpec kv_spec(int block_size) const override {
    return make_kv_cache_spec(KvCacheDtype::Auto, DType::F32, block_size, 1, 1, 4);
  }
  std::optional<size_t> kv_cache_budget(double, size_t) override { return std::nullopt; }
  size_t activation_bytes(int64_t, int64_t) const override { return 0; }
  void tune(int64_t, int64_t) override {}
  void copy_blocks(const std::vector<std::pair<int, int>>& pairs, int group) override {
    LLM_CHECK(group == 0) << "one pool here";
    for (auto [src, dst] : pairs)
      for (int i = 0; i < block_size_; ++i) slots_[size_t(dst * block_size_ + i)] = slots_[size_t(src * block_size_ + i)];
    copied_blocks += int64_t(pairs.size());
  }

 protected:
  void do_alloc_kv_cache(const KvCacheSpec& spec, const KvCacheLayout& layout) override {
    block_size_ = spec.block_size;
    slots_.assign(size_t(layout.num_blocks[0]) * size_t(block_size_), -1);
  }
  Tensor forward(const BatchPlan& plan) override {
    ++steps;
    max_step_tokens = std::max<int64_t>(max_step_tokens, plan.num_tokens());
    for (int i = 0; i < plan.num_tokens(); ++i) slots_.at(size_t(plan.slot_mapping[size_t(i)])) = plan.token_ids[size_t(i)];
    const int V = config_.vocab_size, R = int(plan.logits_rows.size());
    Tensor logits = Tensor::zeros_host(DType::F32, {R, V});
    for (int r = 0; r < R; ++r) {
      const int i = plan.logits_rows[size_t(r)];
      int s = 0;
      while (plan.query_start[size_t(s) + 1] <= i) ++s;
      std::vector<int32_t> context;  // positions 0..p as the cache holds them
      for (int q = 0; q <= plan.positions[size_t(i)]; ++q) {
        const int block = plan.block_table[size_t(s * plan.max_blocks_per_seq + q / block_size_)];
        context.push_back(slots_.at(size_t(block * block_size_ + q % block_size_)));
      }
      logits.ptr<float>()[int64_t(r) * V + next_token(context)] = kPeak;
    }
    return logits;
  }
  StepOutput sample(const Tensor& logits, const StepSampling& sampling) override {
    return sample_step(*cpu_, logits, sampling);
  }
  Tensor to_host(const Tensor& logits) override { return logits; }
  void step_timer_begin() override {}
  double step_timer_end() override { return 0; }

 private:
  Rule rule_;
  ModelConfig config_;
  std::unique_ptr<Backend> cpu_ = make_cpu_backend(1);
  int block_size_ = 16;
  std::vector<int32_t> slots_;  // the cache: one token id per slot
};

}  // namespace llmctl::test
