// Engine: continuous batching over the paged KV cache. Requests are submitted with their sampling
// parameters; each step() asks the Scheduler who runs, builds one BatchPlan, runs the model once,
// samples every sequence that produced logits and reports text as it becomes safe to emit.
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

#include "engine/executor/executor.h"
#include "engine/kv_cache_plan.h"
#include "engine/sample/detokenizer.h"
#include "engine/sample/sampler.h"
#include "engine/sched/scheduler.h"
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
};

struct SequenceOutput {
  int index = 0;
  std::vector<int> token_ids;          // generated tokens (a final EOS / stop token is not included)
  std::string text;
  std::string finish_reason;           // "stop" | "length" | "abort" | "error" (see RequestResult::error)
  std::vector<TokenLogprobs> logprobs;  // per generated token, when params.logprobs is set
  double cumulative_logprob = 0;       // sum of the chosen tokens' logprobs, when `scored`
  bool scored = false;                 // logprobs were computed (params.logprobs set, or best_of > n)
};

struct RequestResult {
  int64_t id = 0;
  std::vector<int> prompt_ids;
  std::vector<SequenceOutput> outputs;  // n of them (the n best of best_of), by index
  // With params.prompt_logprobs: one entry per prompt token, the first empty (nothing predicts it).
  std::vector<std::optional<TokenLogprobs>> prompt_logprobs;
  bool finished = false;
  // Non-empty when the request failed: drawing, decoding or stop-checking one of its sequences
  // threw. The request ends at once (outputs partial, finish_reason "error"); the other requests of
  // the step go on.
  std::string error;
  double submit_seconds = 0, first_token_seconds = 0, finish_seconds = 0;  // steady clock
};

struct EngineStats {
  int64_t steps = 0, prompt_tokens = 0, generated_tokens = 0, preemptions = 0;
  double forward_seconds = 0;   // host wall time of forward + sampling (overlapping steps counted once)
  double device_seconds = 0;    // device time inside steps (CUDA events; 0 on the CPU)
  double waste_sum = 0;   // sum over steps of the KV waste after the step (allocated slots not holding a token)
  double usage_peak = 0;  // highest fraction of blocks in use after a step
  std::vector<int> peak_blocks;  // per KV pool (kv_cache_groups.h): the most blocks in use after a step
  int64_t draft_tokens = 0;           // speculative drafts verified (EngineConfig::proposer)
  int64_t accepted_draft_tokens = 0;  // of them, kept (each one a token without a step of its own)
  KvCacheStats kv;        // now
  double mean_waste() const { return steps ? waste_sum / double(steps) : 0; }
  double acceptance_rate() const { return draft_tokens ? double(accepted_draft_tokens) / double(draft_tokens) : 0; }
};

// What a stream callback receives: the text of sequence `index` that became safe to emit, and the
// tokens accepted since the previous event (their text is in this piece or held back for a stop
// string). `done` marks the sequence's last event, with its finish_reason.
struct StreamEvent {
  int64_t request_id = 0;
  int index = 0;
  std::string_view text;
  std::span<const int> token_ids;
  std::span<const TokenLogprobs> logprobs;  // per token in token_ids, when params.logprobs is set
  bool done = false;
  std::string_view finish_reason;           // when done: "stop" | "length" | "abort"
};

class Engine {
 public:
  // Called from step() / abort() on the engine's thread. With best_of, a sequence's text is known
  // only at the end: one event per returned sequence, all tokens at once.
  using StreamFn = std::function<void(const StreamEvent&)>;

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
  struct Sequence;
  struct Request;
  struct Draw;
  struct StepSeq;
  struct InFlight;
  // How many steps may be in flight: the executor's (pipeline stages), 1 with a draft proposer.
  int steps_in_flight_limit() const;
  // Schedules, plans and submits one step (in_flight_.back()); false when nothing was scheduled.
  bool launch_step();
  // What the step's draws and prompt rows ask of sampling (pointing into the step's requests).
  StepSampling step_sampling(const InFlight& f) const;
  // Advances the step's sequences by the tokens it drew.
  void finish_step(InFlight& f, StepOutput step);
  // The step's per-sequence entries, its logits rows (plan rows, ascending) and its draws, decided
  // once from the scheduler's output.
  std::vector<StepSeq> plan_step(const SchedulerOutput& out, std::vector<int32_t>& logits_rows, std::vector<Draw>& draws);
  // Before schedule(): drafts from cfg_.proposer for the decoding sequences (Scheduler::append_draft).
  void propose_drafts();
  // Records sequence `child`'s new token and decides whether it ends.
  void accept_token(Request& r, int child, const SampleResult& res);
  void finish_sequence(Request& r, int child, const std::string& reason);
  // Reports `piece` and the tokens not yet reported for a streamed (non-best_of) sequence.
  void emit(Request& r, int child, std::string_view piece, bool done);
  void fork_children(Request& r, std::span<const Draw> children);
  // Completes a request whose sequences are all done (deferred while a step in flight has it).
  void complete_if_done(int64_t request_id);
  void complete_aborted_in_step();  // complete_if_done for each request in aborted_in_step_
  // Ends every sequence of r with finish_reason "error", frees them in the scheduler and records
  // the message in the result.
  void fail_request(Request& r, const std::string& message);

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
  std::unordered_map<int64_t, std::unique_ptr<Request>> requests_;
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
