// Engine: continuous batching over the paged KV cache. Requests are submitted with their sampling
// parameters; each step() is schedule -> execute -> update: the Scheduler says who runs, the step
// is planned (step_plan.h: one BatchPlan and its StepSampling), the Executor runs the model and
// draws the tokens below it (it returns a StepOutput; the engine never sees logits), and the
// sequences advance by their tokens, reporting text as it becomes safe to emit.
//
// A request with n > 1 (or best_of) runs its prompt once: after the prompt step, each child samples
// its first token from the same logits (with its own seed) and is forked from the parent, sharing
// the prompt's KV blocks. Outputs do not depend on what else is in the batch: the kernels reduce
// in a batch-independent order and every draw is keyed by (sequence seed, step).
//
// Speculative decoding (EngineConfig::proposer): before a step, each decoding sequence may get up to
// num_speculative_tokens drafts from the proposer; the step computes them with its last token and
// yields d + 1 logits rows, drawn in order, each with the sequence's state after the previous ones
// and the draw keyed by (seed, step) as without drafts. Drafts are kept while the drawn token equals
// them; the first mismatch's token (or row d's when all match) is the next token. So every token is
// the one a run without a proposer draws, whatever the temperature (given logits that do not depend
// on how a step is batched: the CPU backend, or CUDA with --deterministic).
//
// Request states: queued (in the scheduler) -> running -> finished (all children done) | aborted.
#pragma once
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/engine_request.h"
#include "engine/engine_stats.h"
#include "engine/executor/executor.h"
#include "engine/kv_cache_plan.h"
#include "engine/request_output.h"
#include "engine/sched/scheduler.h"
#include "engine/step_plan.h"
#include "engine/spec/proposer.h"
#include "engine/tokenizer/tokenizer.h"

namespace llmctl {

struct EngineConfig {
  SchedulerConfig sched;
  int num_blocks = 0;                  // KV blocks; 0 = from kv_cache_bytes
  double kv_cache_bytes = 1.0 * (1 << 30);
  // > 0 on a device backend: the KV cache takes what is left of this fraction of the device's
  // memory after the weights and the activations of a full step (vLLM's --gpu-memory-utilization).
  double gpu_memory_utilization = 0;
  int max_context = 0;                 // 0 = the model's max_position_embeddings
  // Speculative decoding: drafts of up to num_speculative_tokens per decoding sequence and step
  // (fewer near max_tokens or when the step's token budget runs short). null or 0 = off.
  std::shared_ptr<const Proposer> proposer;
  int num_speculative_tokens = 0;
  // Structured output: where a grammar allows exactly one next token, it is appended without a
  // draw, up to this many after each drawn token, and computed with them in one step (the output is
  // the same: a draw among one token takes it). 0 = off.
  int jump_forward_tokens = 16;
};

class Engine {
 public:
  // Called from step() / abort() on the engine's thread. With best_of, a sequence's text is known
  // only at the end: one event per returned sequence, all tokens at once.
  using StreamFn = llmctl::StreamFn;

  // The executor's KV cache is (re)allocated here: one Engine per executor at a time.
  Engine(Executor& executor, const Tokenizer& tokenizer, EngineConfig config = {});
  ~Engine();

  // The tokenizer may have fewer tokens than the model's vocabulary (padded embeddings): the ids
  // past it are masked out of sampling (never drawn, never in top logprobs). A tokenizer larger
  // than the model's vocabulary is refused (InputError).
  //
  // Validates and queues a request; throws InputError naming the problem (nothing is queued then).
  // Prompt ids must be tokenizer ids; logit_bias and stop_token_ids ids model ids (a bias on a
  // masked id is accepted and has no effect).
  int64_t submit(std::vector<int> prompt, const SamplingParams& params, StreamFn on_text = {});
  // One iteration. false when there was nothing to run.
  bool step();
  // Any state: the request ends with finish_reason "abort" and its blocks are freed at once.
  void abort(int64_t request_id);
  void drain();  // step until every request has finished
  bool has_unfinished() const { return !requests_.empty(); }
  // Requests with at least one sequence running (n = 8 counts once); the scheduler counts sequences.
  int num_running_requests() const;
  // The result of a finished request (removed from the engine); nullopt while it runs.
  std::optional<RequestResult> take_result(int64_t request_id);

  int max_context() const { return max_context_; }
  int sample_vocab() const { return sample_vocab_; }  // ids that may be drawn: [0, sample_vocab())
  int num_blocks() const { return kv_.layout.num_blocks[0]; }  // of the full-attention layers' pool (group 0)
  const KvCacheLayout& kv_layout() const { return kv_.layout; }
  // "bf16 KV cache: N blocks = M tokens ...": what the cache holds, pool by pool.
  std::string describe_kv_cache() const;
  const KvCacheSpec& kv_spec() const { return kv_.spec; }
  EngineStats stats() const;
  const Scheduler& scheduler() const { return *sched_; }

 private:
  struct InFlight;
  // How many steps may be in flight: the executor's (pipeline stages), 1 with a draft proposer.
  int steps_in_flight_limit() const;
  // Schedules, plans and submits one step (in_flight_.back()); false when nothing was scheduled.
  bool launch_step();
  // Advances the step's sequences by the tokens it drew.
  void finish_step(InFlight& f, StepOutput step);
  // The request a scheduled sequence belongs to (LLM_CHECK: it has one).
  EngineRequest& owner(const ScheduledSeq& ss);
  // Before schedule(): drafts from cfg_.proposer for the decoding sequences (Scheduler::append_draft).
  void propose_drafts();
  // Counts sequence `child`'s new token and records it (EngineRequest::accept_token); true when it
  // is an output token.
  bool accept_token(EngineRequest& r, int child, const SampleResult& res, bool matched = false);
  // While the grammar of sequence `child` allows exactly one next token (not a stop token), accepts
  // it without a draw (at most cfg_.jump_forward_tokens), appending the output ones to `appended`.
  void jump_forward(EngineRequest& r, int child, std::vector<int32_t>& appended);
  void fork_children(EngineRequest& r, std::span<const StepDraw> children);
  // Completes a request whose sequences are all done (deferred while a step in flight has it).
  void complete_if_done(int64_t request_id);
  void complete_aborted_in_step();  // complete_if_done for each request in aborted_in_step_
  // Ends every sequence of r with finish_reason "error", frees them in the scheduler and records
  // the message in the result.
  void fail_request(EngineRequest& r, const std::string& message);

  Executor& exec_;
  const Tokenizer& tok_;
  EngineConfig cfg_;
  int max_context_ = 0;
  KvCachePlan kv_;
  int sample_vocab_ = 0;  // ids [0, sample_vocab_) may be drawn: min(model, tokenizer) vocabulary
  std::unique_ptr<Scheduler> sched_;
  std::vector<int> eos_ids_;
  int64_t next_id_ = 1;
  int64_t next_seq_id_ = 1;  // scheduler sequence ids; each sequence's owner (request, index) travels with it
  std::unordered_map<int64_t, std::unique_ptr<EngineRequest>> requests_;
  std::unordered_map<int64_t, RequestResult> finished_;
  EngineStats stats_;
  bool in_step_ = false;                  // inside step(): stream callbacks may run
  // Aborted from a callback during the step, or done while a step in flight has them: completed
  // at the end of a step (once no step in flight has them).
  std::vector<int64_t> aborted_in_step_;
  double last_step_end_ = 0;  // when the last finish_step ended (EngineStats::forward_seconds)
  std::list<InFlight> in_flight_;  // launched steps, oldest first (a list: InFlight is declared here only)
};

}  // namespace llmctl
