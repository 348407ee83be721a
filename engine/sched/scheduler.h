// Scheduler: iteration-level (continuous) batching policy, FCFS, over a paged KV cache. Policy only:
// no device code, no model. It owns the waiting / running queues and the KvCacheManager.
//
// One engine step:
//   SchedulerOutput out = sched.schedule();         // who computes how many tokens this step
//   copy KV blocks out.block_copies (src -> dst)   // before the forward (copy-on-write)
//   BatchPlan plan = build_batch_plan(out, sched);  // engine/sched/batch_builder.h
//   forward, sample the rows of sequences with samples == true
//   for each s in out.seqs: sched.on_step_done(s.seq_id, token or nullopt, finished?)
// Every scheduled sequence must get its on_step_done before the next schedule() (an aborted one may
// get it or not). Not thread-safe: call everything from the engine loop.
//
// schedule() rules, in order:
//   1. decodes: running sequences with one pending token (oldest first), 1 token each;
//   2. running sequences with a partly computed prompt (chunked prefill), oldest first;
//   3. if nothing was preempted this step: waiting requests, FCFS, each admitted only when all blocks
//      for its tokens can be had (stops at the first that cannot: no overtaking), and, with
//      defer_shared_prefill, not while a running prefill is computing its next uncached full block;
//   all within max_num_seqs (sequences in the step; also caps running sequences for admission) and
//   max_num_batched_tokens (new tokens in the step; a long prompt is split into chunks when
//   chunked_prefill is on, otherwise it must fit whole).
//   When a scheduled sequence cannot get a block, the youngest running sequence (latest arrival) is
//   preempted (recompute: blocks freed, tokens kept, requeued at the front of the waiting queue), again
//   until the block can be had; a sequence preempts itself when it is the youngest.
#pragma once
#include <cstdint>
#include <deque>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "engine/kv/kv_cache_manager.h"
#include "engine/sched/request.h"

namespace llmctl {

struct SchedulerConfig {
  int max_num_seqs = 256;             // sequences in one step
  int max_num_batched_tokens = 2048;  // new tokens in one step
  int block_size = 16;                // tokens per KV block
  bool enable_prefix_caching = true;
  bool chunked_prefill = true;        // off: a prompt is computed in one step (must fit the token budget)
  // With prefix caching: the head of the waiting queue waits while its first uncached full block is
  // still being computed by a running prefill, then finds it cached (a shared system prompt is computed
  // once instead of once per request admitted in the same step).
  bool defer_shared_prefill = true;
};

// One sequence in a step: computes tokens[start, start + num_new) at positions start...
struct ScheduledSeq {
  int64_t seq_id = 0;
  int start = 0;         // first new position (= tokens already in the cache)
  int num_new = 0;       // a prefill chunk, or 1 for a decode
  bool samples = false;  // the chunk ends at the sequence's last token: its logits give the next token
};

struct SchedulerOutput {
  std::vector<ScheduledSeq> seqs;                 // batch order: decodes, continued prefills, admitted
  std::vector<int64_t> preempted;                 // preempted this step (back in the waiting queue)
  std::vector<std::pair<int, int>> block_copies;  // (src, dst) KV block copies to do before the forward
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

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, int num_blocks);

  // Queues a request (waiting). Throws InputError when it can never run: empty prompt, max_total_tokens
  // <= prompt length, more blocks than the pool holds, or (without chunked prefill) more tokens than
  // the step budget. Throws if the id is in use.
  // prefix_cache false: no prefix-cache hits for it (every prompt token computed).
  void add(int64_t seq_id, std::vector<int32_t> prompt, int max_total_tokens, bool prefix_cache = true);
  // Any state -> aborted; blocks freed at once. false when the id is unknown (finished or never added).
  bool abort(int64_t seq_id);
  // New running sequence `child` sharing all of `parent`'s blocks and tokens (n > 1, best_of). The parent
  // must be running and not in flight. last_token replaces the child's copy of the parent's last token,
  // which must not be computed yet (e.g. the parent and child each sampled their own first token).
  void fork(int64_t parent, int64_t child, std::optional<int32_t> last_token = std::nullopt);

  [[nodiscard]] SchedulerOutput schedule();
  // Reports a scheduled sequence's step: its new tokens are now in the cache; `sampled` (required when
  // the sequence sampled, unless it finishes) is appended. Finishes it when `finished` or when it reaches
  // max_total_tokens. Returns true when the request is gone (finished now, or aborted while in flight).
  bool on_step_done(int64_t seq_id, std::optional<int32_t> sampled, bool finished = false);

  bool has(int64_t seq_id) const { return reqs_.count(seq_id) > 0; }
  const Request& request(int64_t seq_id) const;
  int num_waiting() const { return int(waiting_.size()); }
  int num_running() const { return int(running_.size()); }
  bool has_unfinished() const { return !reqs_.empty(); }
  const SchedulerConfig& config() const { return cfg_; }
  const KvCacheManager& kv() const { return kv_; }
  const SchedulerStats& stats() const { return stats_; }
  // Throws Error unless queues, request states, the cache manager and the pool agree.
  void check_invariants() const;

 private:
  Request& req(int64_t seq_id);
  bool reserve(Request& r, int total_tokens, SchedulerOutput& out, int& budget);
  void preempt(int64_t seq_id, SchedulerOutput& out, int& budget);
  void put(Request& r, int num_new, SchedulerOutput& out, int& budget);
  void insert_running(int64_t seq_id);
  bool prefix_in_progress(const Request& r) const;
  void erase_running(int64_t seq_id);
  void finish(Request& r, RequestState state);

  SchedulerConfig cfg_;
  KvCacheManager kv_;
  std::unordered_map<int64_t, Request> reqs_;
  std::deque<int64_t> waiting_;        // front is admitted first
  std::vector<int64_t> running_;       // sorted by arrival: back is the youngest
  std::unordered_set<int64_t> aborted_in_flight_;
  int in_flight_ = 0;
  uint64_t next_arrival_ = 0;
  SchedulerStats stats_;
};

}  // namespace llmctl
