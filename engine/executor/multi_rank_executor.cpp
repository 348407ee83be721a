#include "engine/executor/multi_rank_executor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/executor/plan_codec.h"

namespace llmctl {

namespace {

enum class Op : int32_t { Execute = 1, AllocKv, CopyBlocks, Tune, KvBudget, Shutdown };

// What rank 0 broadcasts before each call; payload_bytes of payload follow it.
struct Command {
  Op op = Op::Shutdown;
  int32_t i = 0;   // AllocKv: block size; Tune: max rows; CopyBlocks: KV group
  int64_t n = 0;   // AllocKv: groups (payload: their blocks, then their windows); Tune: max tokens;
                   // KvBudget: reserved bytes
  double d = 0;    // KvBudget: gpu memory utilization
  int32_t kind = 0;  // AllocKv: KvCacheDtype
  int32_t ring = 0;  // AllocKv: exact_ring_blocks
  uint64_t payload_bytes = 0;
};

// The budget as one number for the minimum over ranks: -1 = no device limit (nullopt).
int64_t budget_code(const std::optional<size_t>& b) { return b ? int64_t(*b) : -1; }

// The same call on a LocalExecutor, for rank 0 and the others alike. Returns false on Shutdown.
bool run_command(LocalExecutor& local, Comm& comm, const Command& c, const std::vector<uint8_t>& payload,
                 Tensor* logits, std::optional<size_t>* budget) {
  switch (c.op) {
    case Op::Execute: {
      const BatchPlan plan = decode_plan(payload);
      Tensor out = local.runner().execute(plan);
      if (logits) *logits = out;
      return true;
    }
    case Op::AllocKv: {
      KvCacheSpec spec = local.kv_spec(c.i);
      LLM_CHECK(int32_t(spec.kind) == c.kind) << "rank " << comm.rank() << " has another KV cache dtype than rank 0";
      LLM_CHECK((spec.exact_ring_blocks > 0) == (c.ring > 0))
          << "rank " << comm.rank() << (c.ring > 0 ? " keeps no" : " keeps") << " exact KV rows, unlike rank 0";
      spec.exact_ring_blocks = c.ring;
      LLM_CHECK(c.n >= 1 && c.n <= 2 && payload.size() == size_t(2 * c.n) * sizeof(int32_t))
          << "alloc_kv_cache of " << c.n << " groups with " << payload.size() << " payload bytes";
      const auto* v = reinterpret_cast<const int32_t*>(payload.data());
      local.alloc_kv_cache(spec, KvCacheLayout(std::vector<int>(v, v + c.n), std::vector<int>(v + c.n, v + 2 * c.n)));
      return true;
    }
    case Op::CopyBlocks: {
      LLM_CHECK(payload.size() % (2 * sizeof(int32_t)) == 0) << "copy_blocks payload of " << payload.size() << " bytes";
      std::vector<std::pair<int, int>> pairs(payload.size() / (2 * sizeof(int32_t)));
      const auto* v = reinterpret_cast<const int32_t*>(payload.data());
      for (size_t k = 0; k < pairs.size(); ++k) pairs[k] = {v[2 * k], v[2 * k + 1]};
      local.copy_blocks(pairs, c.i);
      return true;
    }
    case Op::Tune: local.tune(c.n, c.i); return true;
    case Op::KvBudget: {
      const int64_t mine = budget_code(local.kv_cache_budget(c.d, size_t(c.n)));
      // -1 (no device limit) must not win the minimum over real budgets: rank budgets are all
      // nullopt or all numbers (same backend), so the minimum of the codes is the answer.
      const int64_t least = comm.all_reduce_min(mine);
      if (budget) *budget = least < 0 ? std::nullopt : std::optional<size_t>(size_t(least));
      return true;
    }
    case Op::Shutdown: return false;
  }
  LLM_CHECK(false) << "unknown command " << int(c.op) << " from rank 0";
  return false;
}

class MultiRankExecutor final : public Executor {
 public:
  MultiRankExecutor(Model& model, KvCacheOptions kv, Comm& comm, PipelineOptions pp) : local_(model, kv, pp), comm_(comm) {
    LLM_CHECK(comm.rank() == 0) << "the multi-rank executor runs on rank 0, not " << comm.rank();
  }
  ~MultiRankExecutor() override {
    // Steps still in flight are received first (no receive may be left pending); then the other
    // ranks leave serve_rank_steps. An exception here would end the process anyway.
    try {
      while (!sent_.empty()) collect();
      send({Op::Shutdown}, {});
    } catch (...) {
    }
  }

  const ModelConfig& config() const override { return local_.config(); }
  DType weight_dtype() const override { return local_.weight_dtype(); }
  void check_context(int context) const override { local_.check_context(context); }
  KvCacheSpec kv_spec(int block_size) const override { return local_.kv_spec(block_size); }
  std::optional<size_t> kv_cache_budget(double util, size_t reserve) override {
    Command c{Op::KvBudget};
    c.d = util, c.n = int64_t(reserve);
    std::optional<size_t> budget;
    run(c, {}, nullptr, &budget);
    return budget;
  }
  void do_alloc_kv_cache(const KvCacheSpec& spec, const KvCacheLayout& layout) override {
    LLM_CHECK(spec.num_kv_heads == local_.kv_spec(spec.block_size).num_kv_heads) << "KV cache spec of another rank";
    Command c{Op::AllocKv};
    c.i = spec.block_size, c.n = layout.num_groups(), c.kind = int32_t(spec.kind), c.ring = spec.exact_ring_blocks;
    std::vector<int32_t> v(layout.num_blocks.begin(), layout.num_blocks.end());
    v.insert(v.end(), layout.windows.begin(), layout.windows.end());
    std::vector<uint8_t> payload(v.size() * sizeof(int32_t));
    std::memcpy(payload.data(), v.data(), payload.size());
    run(c, payload, nullptr, nullptr);
  }
  size_t activation_bytes(int64_t tokens, int64_t rows) const override { return local_.activation_bytes(tokens, rows); }
  void tune(int64_t max_tokens, int64_t max_rows) override {
    Command c{Op::Tune};
    c.n = max_tokens, c.i = int32_t(max_rows);
    run(c, {}, nullptr, nullptr);
  }
  void copy_blocks(const std::vector<std::pair<int, int>>& pairs, int group = 0) override {
    std::vector<uint8_t> payload(pairs.size() * 2 * sizeof(int32_t));
    auto* v = reinterpret_cast<int32_t*>(payload.data());
    for (size_t k = 0; k < pairs.size(); ++k) v[2 * k] = pairs[k].first, v[2 * k + 1] = pairs[k].second;
    Command c{Op::CopyBlocks};
    c.i = group;
    run(c, payload, nullptr, nullptr);
  }
  bool host_free_during_forward() const override { return local_.host_free_during_forward(); }
  // Pipeline stages: as many steps in flight as stages, so that each stage has one to work on
  // (PipelineOptions::steps_in_flight 1 turns it off, for measurements). The other ranks run each
  // Execute as it comes: a stage takes the next step once it has passed the previous one on.
  int max_steps_in_flight() const override {
    const int stages = local_.runner().model().pipeline_stages();
    if (stages <= 1) return 1;
    const int asked = local_.runner().pipeline_options().steps_in_flight;
    if (asked > 0) return std::clamp(asked, 1, stages);
    return stages;
  }
  // The command goes out without waiting for the other ranks to take it (a blocking broadcast
  // would wait for the last stage to finish the step before): its buffers stay here until the
  // step is collected.
  void submit(const BatchPlan& plan, const StepSampling& sampling) override {
    if (max_steps_in_flight() == 1) return Executor::submit(plan, sampling);
    Sent& s = sent_.emplace_back();
    s.sampling = sampling;
    // The steps in flight keep the stages busy already: only a large step is also cut into
    // micro-batches (each reads the stage's weights again). Measured in docs/PERFORMANCE.md.
    BatchPlan sent = plan;
    if (plan.num_tokens() < ModelRunner::kMicroBatchTokensInFlight * max_steps_in_flight()) sent.micro_batches = 1;
    s.payload = encode_plan(sent);
    s.command.op = Op::Execute;
    s.command.payload_bytes = s.payload.size();
    s.handles[0] = comm_.ibroadcast(&s.command, sizeof s.command, 0);
    if (!s.payload.empty()) s.handles[1] = comm_.ibroadcast(s.payload.data(), s.payload.size(), 0);
    try {
      local_.runner().submit(decode_plan(s.payload));
    } catch (const std::exception& e) {
      comm_.abort_all(e.what());
    }
  }
  // The oldest step's logits, then its draws (on rank 0 alone: the other ranks are already on to
  // the next step).
  StepOutput collect() override {
    if (max_steps_in_flight() == 1) return Executor::collect();
    Tensor logits;
    StepSampling sampling;
    try {
      LLM_CHECK(!sent_.empty()) << "collect without a submitted step";
      for (int64_t h : sent_.front().handles) comm_.wait(h);
      sampling = std::move(sent_.front().sampling);
      sent_.pop_front();
      logits = local_.runner().collect();
    } catch (const std::exception& e) {
      comm_.abort_all(e.what());
    }
    return local_.runner().sample(logits, sampling);
  }

 protected:
  Tensor forward(const BatchPlan& plan) override {
    Tensor logits;
    run({Op::Execute}, encode_plan(plan), &logits, nullptr);
    return logits;
  }
  StepOutput sample(const Tensor& logits, const StepSampling& sampling) override {
    return local_.runner().sample(logits, sampling);
  }
  Tensor to_host(const Tensor& logits) override { return local_.runner().backend().to_host_f32(logits); }
  void step_timer_begin() override { local_.runner().backend().step_timer_begin(); }
  double step_timer_end() override { return local_.runner().backend().step_timer_end(); }
  uint64_t step_weight_bytes() override { return local_.runner().backend().take_weight_bytes(); }

 private:
  void send(Command c, const std::vector<uint8_t>& payload) {
    c.payload_bytes = payload.size();
    comm_.broadcast(&c, sizeof c, 0);
    if (!payload.empty()) comm_.broadcast(const_cast<uint8_t*>(payload.data()), payload.size(), 0);
  }
  // Sends the command, then runs it here. Once the others have it, a failure here cannot be taken
  // back (they are inside the same collectives): every rank is stopped with the message.
  void run(const Command& c, const std::vector<uint8_t>& payload, Tensor* logits, std::optional<size_t>* budget) {
    send(c, payload);
    try {
      run_command(local_, comm_, c, payload, logits, budget);
    } catch (const std::exception& e) {
      comm_.abort_all(e.what());
    }
  }

  LocalExecutor local_;
  Comm& comm_;
  struct Sent {  // a submitted step's command, until it is collected
    Command command;
    std::vector<uint8_t> payload;
    StepSampling sampling;  // drawn from the step's logits when it is collected
    int64_t handles[2] = {-1, -1};
  };
  std::deque<Sent> sent_;
};

}  // namespace

std::unique_ptr<Executor> make_multi_rank_executor(Model& model, KvCacheOptions kv, Comm& comm, PipelineOptions pp) {
  return std::make_unique<MultiRankExecutor>(model, kv, comm, pp);
}

void serve_rank_steps(LocalExecutor& local, Comm& comm) {
  LLM_CHECK(comm.rank() != 0) << "rank 0 runs the engine, not serve_rank_steps";
  std::vector<uint8_t> payload;
  for (;;) {
    Command c;
    comm.broadcast(&c, sizeof c, 0);
    payload.resize(size_t(c.payload_bytes));
    if (!payload.empty()) comm.broadcast(payload.data(), payload.size(), 0);
    try {
      if (!run_command(local, comm, c, payload, nullptr, nullptr)) return;
    } catch (const std::exception& e) {
      comm.abort_all(e.what());
    }
  }
}

}  // namespace llmctl
