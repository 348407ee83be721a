// Sequence: what the scheduler knows of one sequence (token ids and counters; no text, no sampling).
// There are no prefill / decode phases: a running sequence has tokens [0, num_computed) in the cache
// and a target, all its known tokens (prompt, accepted generated tokens, then num_draft appended but
// unverified ones); each step computes some of the pending tokens [num_computed, tokens.size()).
//
// States:
//   waiting  -> running    admitted by Scheduler::schedule() once its blocks can be had
//   running  -> waiting    preempted (recompute): blocks freed, verified tokens kept (drafts dropped),
//                          requeued at the front
//   running  -> finished   Scheduler::on_step_done() with finished = true, or max_total_tokens reached
//   any      -> aborted    Scheduler::abort(); blocks are freed at once
// Finished and aborted sequences leave the scheduler; the object lives on where it was shared
// (Scheduler::share): the engine reads a sequence's output tokens from it (engine_request.h), so a
// sequence's tokens are stored once, here.
//
// Tokens of a running sequence (N = tokens.size(), d = num_draft):
//   [0, num_computed)        KV in the cache
//   [num_computed, N)        pending: computed by the next steps, min(pending, budget) at a time
//   [N - d, N)               drafts (Scheduler::append_draft): verified in the one step that computes
//                            [N - d - 1, N); the rejected ones are cut off and their KV rolled back
#pragma once
#include <cstdint>
#include <vector>

namespace llmctl {

enum class SeqStatus { waiting, running, finished, aborted };

const char* to_string(SeqStatus s);

// Who a scheduler sequence belongs to: the engine's request and the sequence's index in it (n > 1,
// best_of). The scheduler carries it and hands it back in every ScheduledSeq; it never reads it.
struct SeqOwner {
  int64_t request_id = -1;
  int index = 0;
};

struct Sequence {
  int64_t id = 0;
  SeqOwner owner;
  uint64_t arrival = 0;         // submission order; kept across preemption (the youngest is preempted first)
  SeqStatus state = SeqStatus::waiting;
  std::vector<int32_t> tokens;  // [n] prompt, then generated tokens, then num_draft unverified drafts
  int prompt_len = 0;
  int max_total_tokens = 0;     // prompt + generated; reaching it finishes the sequence
  int num_computed = 0;         // tokens whose KV is in the cache: positions [0, num_computed)
  int num_scheduled = 0;        // new tokens in the step now in flight (0 when not in flight)
  int num_draft = 0;            // trailing tokens appended unverified (speculative / jump-forward drafts)
  int num_preemptions = 0;
  bool prefix_cache = true;     // false: its prompt is computed whole (prompt logprobs need every row)

  int num_generated() const { return int(tokens.size()) - num_draft - prompt_len; }
  int num_pending() const { return int(tokens.size()) - num_computed; }  // tokens still to compute
  // First position whose logits a verifying step needs: the last verified token (it predicts the
  // first draft, or the next token when there is none).
  int verify_start() const { return int(tokens.size()) - num_draft - 1; }
};

}  // namespace llmctl
