// Scheduler: iteration-level (continuous) batching policy, FCFS, over a paged KV cache. Policy only:
// no device code, no model. It owns the waiting / running queues and the KV cache's block tables
// (KvCacheGroups: one KvCacheManager per kind of layer).
//
// Model: each running sequence has num_computed tokens in the cache and a target (all its tokens,
// drafts included, see sequence.h); a step gives it min(pending, budget) of its pending tokens. There
// are no prefill / decode phases, only the priorities below.
//
// One engine step:
//   [sched.append_draft(seq, drafts)]               // optional, before schedule(): unverified tokens
//   SchedulerOutput out = sched.schedule();         // who computes how many tokens this step
//   copy KV blocks out.block_copies (src -> dst)   // before the forward (copy-on-write)
//   BatchPlan plan = build_batch_plan(out, sched, rows);  // engine/sched/batch_builder.h
//   forward, sample the rows of sequences with samples == true
//   for each s in out.seqs: sched.on_step_done(s.seq_id, {accepted drafts, new tokens, finished?})
// Every scheduled sequence must get its on_step_done before the next schedule() (an aborted one may
// get it or not), unless that schedule() is told that steps are in flight (ScheduleLimits below). Not thread-safe: call everything from the engine loop.
//
// A step's outcome for one sequence (on_step_done), N = tokens before the step, d = its drafts:
//   chunk ends before N (samples == false): num_computed += num_new; nothing accepted or appended
//   chunk ends at N (samples == true):     the drafts were verified: the first num_accepted stay, the
//                                           other d - num_accepted are cut off and their KV rolled back
//                                           (KvCacheManager::truncate: blocks freed, hashes never
//                                           registered for them); num_computed = N - rejected; then
//                                           `appended` (the sampled token, a correction / bonus token,
//                                           or a jump-forward run) becomes the new pending tokens.
//
// schedule() rules, in order:
//   1. running sequences whose pending tokens are their last verified token and its drafts (one
//      step computes them and samples: the classic decode), oldest first, all of them at once;
//   2. the other running sequences (a partly computed prompt, or tokens appended by jump-forward),
//      oldest first, min(pending, budget) tokens each (chunked); a chunk never ends inside the
//      verification window [N - d - 1, N): drafts are verified in one step or not at all;
//   3. if nothing was preempted this step: waiting requests, FCFS, each admitted only when all blocks
//      for its tokens can be had (stops at the first that cannot: no overtaking), and, with
//      defer_shared_prefill, not while a running prefill is computing its next uncached full block;
//   all within max_num_seqs (sequences in the step; also caps running sequences for admission) and
//   max_num_batched_tokens (new tokens in the step; a long prompt is split into chunks when
//   chunked_prefill is on, otherwise it must fit whole).
//   When a scheduled sequence cannot get a block, the youngest running sequence (latest arrival) is
//   preempted (recompute: blocks freed, verified tokens kept, drafts dropped, requeued at the front of
//   the waiting queue), again until the block can be had; a sequence preempts itself when it is the
//   youngest.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "engine/kv/kv_cache_groups.h"
#include "engine/sched/sequence.h"

namespace llmctl {

struct SchedulerConfig {
  int max_num_seqs = 256;             // sequences in one step
  int max_num_batched_tokens = 2048;  // new tokens in one step
  int block_size = 16;                // tokens per KV block
  bool enable_prefix_caching = true;
  // Exact slots in the KV cache manager (an fp8 cache that keeps open blocks exact): the engine sets
  // it from the cache spec.
  bool kv_exact_slots = false;
  bool chunked_prefill = true;        // off: a prompt is computed in one step (must fit the token budget)
  // With prefix caching: the head of the waiting queue waits while its first uncached full block is
  // still being computed by a running prefill, then finds it cached (a shared system prompt is computed
  // once instead of once per request admitted in the same step).
  bool defer_shared_prefill = true;
};

// One sequence in a step: computes tokens[start, start + num_new) at positions start...
struct ScheduledSeq {
  int64_t seq_id = 0;
  SeqOwner owner;        // as given to add() / fork()
  int start = 0;         // first new position (= tokens already in the cache)
  int num_new = 0;       // a prompt chunk, or 1 for a decode, or 1 + num_draft for a verification
  bool samples = false;  // the chunk ends at the sequence's last token: its logits give the next token
  int num_draft = 0;     // when samples: drafts among the new tokens (the last num_draft of them); the
                         // last num_draft + 1 rows predict each draft, then the token after them
};

// What the engine reports for one scheduled sequence after its step (see the header comment).
struct StepOutcome {
  int num_accepted = 0;                // drafts of the step that stay (0..ScheduledSeq::num_draft)
  std::span<const int32_t> appended;   // new tokens after them (required when it sampled, unless finished)
  bool finished = false;
};

struct SchedulerOutput {
  std::vector<ScheduledSeq> seqs;                 // batch order: decodes, continued prefills, admitted
  std::vector<int64_t> preempted;                 // preempted this step (back in the waiting queue)
  // (src, dst) KV block copies to do before the forward, one list per KV group
  std::vector<std::vector<std::pair<int, int>>> block_copies;
  std::vector<int32_t> exact_copies;              // (src, dst) exact slot copies, flattened (forks)
  int num_tokens = 0;                             // sum of num_new
  bool empty() const { return seqs.empty(); }
};

struct SchedulerStats {
  int64_t steps = 0;             // schedule() calls that scheduled something
  int64_t scheduled_tokens = 0;
  int64_t admitted = 0;          // waiting -> running (re-admissions after preemption included)
  int64_t preemptions = 0;
  int64_t finished = 0;
  int64_t aborted = 0;
};

// Pipelined steps (pipeline parallelism, Executor::max_steps_in_flight): schedule(limits) with
// steps_in_flight may run while earlier steps' sequences still await on_step_done. Those are left
// out of the new step (they are in flight) and never preempted by it; max_seqs caps the step's
// sequences so that the running ones spread over the steps in flight.
struct ScheduleLimits {
  int max_seqs = 0;              // sequences in this step; 0: config().max_num_seqs
  bool steps_in_flight = false;  // earlier steps may still be in flight
};

class Scheduler {
 public:
  // One KV group of num_blocks blocks (every layer reads the whole context).
  Scheduler(const SchedulerConfig& config, int num_blocks);
  // One KV group per (num_blocks[g], windows[g]) (engine/kv/kv_cache_groups.h).
  Scheduler(const SchedulerConfig& config, const std::vector<int>& num_blocks, const std::vector<int>& windows);

  // Queues a sequence (waiting). Throws InputError when it can never run: empty prompt, max_total_tokens
  // <= prompt length, more blocks than the pool holds, or (without chunked prefill) more tokens than
  // the step budget. Throws if the id is in use.
  // prefix_cache false: no prefix-cache hits for it (every prompt token computed). owner comes back
  // in every ScheduledSeq of it.
  void add(int64_t seq_id, std::vector<int32_t> prompt, int max_total_tokens, bool prefix_cache = true,
           SeqOwner owner = {});
  // Any state -> aborted; blocks freed at once. false when the id is unknown (finished or never added).
  bool abort(int64_t seq_id);
  // New running sequence `child` sharing all of `parent`'s blocks and tokens (n > 1, best_of). The parent
  // must be running and not in flight. last_token replaces the child's copy of the parent's last token,
  // which must not be computed yet (e.g. the parent and child each sampled their own first token).
  // The parent must have no drafts.
  void fork(int64_t parent, int64_t child, std::optional<int32_t> last_token = std::nullopt, SeqOwner owner = {});
  // Appends unverified tokens to a running sequence's target (not in flight): they are computed and
  // verified together with its last verified token in one step (on_step_done says how many stay).
  // tokens + drafts must stay under max_total_tokens; drafts + 1 must fit max_num_batched_tokens.
  void append_draft(int64_t seq_id, std::span<const int32_t> draft);

  [[nodiscard]] SchedulerOutput schedule(const ScheduleLimits& limits = {});
  // Reports a scheduled sequence's step: its new tokens are now in the cache; rejected drafts are cut
  // off and rolled back, the appended tokens become pending. Finishes it when `finished` or when it
  // reaches max_total_tokens. Returns true when the sequence is gone (finished now, or aborted while in
  // flight).
  bool on_step_done(int64_t seq_id, const StepOutcome& outcome);
  // The one-token form (no drafts verified this step): `sampled` is required when the sequence
  // sampled, unless it finishes.
  bool on_step_done(int64_t seq_id, std::optional<int32_t> sampled, bool finished = false);

  bool has(int64_t seq_id) const { return seqs_.count(seq_id) > 0; }
  const Sequence& sequence(int64_t seq_id) const;
  // The sequence itself, shared with the caller (the engine reads its tokens as its output): it
  // outlives the scheduler's hold on it, with its last tokens and state (finished or aborted).
  std::shared_ptr<const Sequence> share(int64_t seq_id) const;
  int num_waiting() const { return int(waiting_.size()); }
  int num_running() const { return int(running_.size()); }
  bool has_unfinished() const { return !seqs_.empty(); }
  const SchedulerConfig& config() const { return cfg_; }
  const KvCacheGroups& kv() const { return kv_; }
  const SchedulerStats& stats() const { return stats_; }
  // Throws Error unless queues, sequence states, the cache manager and the pool agree.
  void check_invariants() const;

 private:
  const std::shared_ptr<Sequence>& entry(int64_t seq_id) const;  // throws for an unknown id
  Sequence& seq(int64_t seq_id);
  // With steps in flight, only sequences not in flight_before are preempted (false when none is left).
  bool reserve(Sequence& r, int total_tokens, SchedulerOutput& out, int& budget,
               const std::unordered_set<int64_t>& in_flight_before);
  void preempt(int64_t seq_id, SchedulerOutput& out, int& budget);
  void put(Sequence& r, int num_new, SchedulerOutput& out, int& budget);
  int chunk_size(const Sequence& r, int budget) const;  // 0: nothing of r fits this step
  void insert_running(int64_t seq_id);
  bool prefix_in_progress(const Sequence& r) const;
  void erase_running(int64_t seq_id);
  void finish(Sequence& r, SeqStatus state);
  // drafts_reported false (the one-token form): refused when the step verified drafts.
  bool step_done(int64_t seq_id, const StepOutcome& o, bool drafts_reported);

  SchedulerConfig cfg_;
  KvCacheGroups kv_;
  std::unordered_map<int64_t, std::shared_ptr<Sequence>> seqs_;  // shared: share()
  std::deque<int64_t> waiting_;        // front is admitted first
  std::vector<int64_t> running_;       // sorted by arrival: back is the youngest
  std::unordered_set<int64_t> aborted_in_flight_;
  int in_flight_ = 0;
  uint64_t next_arrival_ = 0;
  SchedulerStats stats_;
};

}  // namespace llmctl
