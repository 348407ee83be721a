// A user request inside the Engine: its sequences (n of them, or best_of), their sampling state,
// text and stream position, and what ends them. The scheduler holds each running sequence's
// tokens and KV blocks under its seq_id (engine/sched/sequence.h); this is the side that turns
// tokens into outputs.
//
// A sequence: running -> done (finish_reason "stop" | "length" | "abort" | "error"). The request
// completes when all are done and no step in flight points at it (steps_in_flight == 0).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/request_output.h"
#include "engine/sample/detokenizer.h"
#include "engine/sample/sampler.h"
#include "engine/sample/sequence_state.h"
#include "engine/structured/constraint.h"
#include "engine/tokenizer/tokenizer.h"

namespace llmctl {

struct EngineSequence {
  int64_t seq_id = -1;  // the scheduler's id; -1 until forked
  SequenceState state;
  StreamingText text;
  SequenceOutput out;
  size_t streamed = 0;  // tokens of out.token_ids already reported to the stream callback
  bool done = false;
  // Structured output (params.constraint): where the sequence is in the grammar, and the tokens it
  // allows next (filled when a step that draws for it is planned; read by that step's draw).
  std::unique_ptr<ConstraintMatcher> matcher;
  std::vector<uint32_t> mask;
  bool mask_current = false;  // mask is the matcher's for its current state (filled by jump-forward)
};

// What ends a sequence besides its own parameters.
struct StopContext {
  const Tokenizer& tokenizer;
  std::span<const int> eos_ids;
  int max_context = 0;
};

struct EngineRequest {
  int64_t id = 0;
  SamplingParams params;
  uint64_t seed = 0;
  std::vector<int> prompt;
  std::vector<EngineSequence> seqs;  // params.num_generated_sequences() of them; seqs[0] runs the prompt
  bool forked = false;
  StreamFn on_text;
  RequestResult result;
  int steps_in_flight = 0;  // launched steps with a sequence of it, not yet finished: it stays until 0

  // Records sequence `child`'s new token (already appended to its state by the sampler) and
  // decides whether it ends: a stop token (not part of the output), a stop string (the text is
  // cut before it), max_tokens, or the end of the context. Streams the text that became safe.
  void accept_token(int child, const SampleResult& res, const StopContext& stop, double now);
  // Ends `child` with `reason` and streams the rest of its text (no-op when it is done).
  void finish_sequence(int child, const std::string& reason);
  // Ends every sequence with finish_reason "error" (no stream event: the error is the last word).
  void fail(const std::string& message);
  bool all_done() const;
  // The result, once all_done(): the n best of best_of by cumulative logprob (each streamed now,
  // whole), or all n in order.
  RequestResult take_result(double now);

 private:
  // Reports `piece` and the tokens not yet reported for a streamed (non-best_of) sequence.
  void emit(int child, std::string_view piece, bool done);
};

}  // namespace llmctl
