// Request: one sequence as the scheduler sees it (token ids and counters; no text, no sampling).
//
// States:
//   waiting  -> running    admitted by Scheduler::schedule() once its blocks can be had
//   running  -> waiting    preempted (recompute): blocks freed, tokens kept, requeued at the front
//   running  -> finished   Scheduler::on_step_done() with finished = true, or max_total_tokens reached
//   any      -> aborted    Scheduler::abort(); blocks are freed at once
// Finished and aborted requests leave the scheduler (the engine keeps its own results).
#pragma once
#include <cstdint>
#include <vector>

namespace llmctl {

enum class RequestState { waiting, running, finished, aborted };

const char* to_string(RequestState s);

struct Request {
  int64_t id = 0;
  uint64_t arrival = 0;         // submission order; kept across preemption (the youngest is preempted first)
  RequestState state = RequestState::waiting;
  std::vector<int32_t> tokens;  // [n] prompt, then generated tokens
  int prompt_len = 0;
  int max_total_tokens = 0;     // prompt + generated; reaching it finishes the request
  int num_computed = 0;         // tokens whose KV is in the cache: positions [0, num_computed)
  int num_scheduled = 0;        // new tokens in the step now in flight (0 when not in flight)
  int num_preemptions = 0;
  bool prefix_cache = true;     // false: its prompt is computed whole (prompt logprobs need every row)

  int num_generated() const { return int(tokens.size()) - prompt_len; }
  int num_pending() const { return int(tokens.size()) - num_computed; }  // tokens still to compute
};

}  // namespace llmctl
