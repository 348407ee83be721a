// A user request inside the Engine: its sequences (n of them, or best_of), their sampling state,
// text and stream position, and what ends them. The scheduler holds each running sequence's
// tokens and KV blocks under its seq_id (engine/sched/sequence.h) and shares the Sequence object:
// a sequence's output tokens are read from it (tokens stored once); this is the side that turns
// tokens into outputs.
//
// A sequence: running -> done (finish_reason "stop" | "length" | "abort" | "error"). The request
// completes when all are done and no step in flight points at it (steps_in_flight == 0).
//
// Within a step (Engine::finish_step), per sequence: accept_token() for each token drawn (counts it,
// checks the stops, collects the text that became safe), then the scheduler takes the tokens
// (on_step_done appends them to the shared Sequence), then flush() reports text and tokens to the
// stream callback. So a stream event's tokens are always in the Sequence when it is sent.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/request_output.h"
#include "engine/sched/sequence.h"
#include "engine/sample/detokenizer.h"
#include "engine/sample/sampler.h"
#include "engine/sample/sequence_state.h"
#include "engine/structured/constraint.h"
#include "engine/tokenizer/tokenizer.h"

namespace llmctl {

struct EngineSequence {
  int64_t seq_id = -1;  // the scheduler's id; -1 until forked
  // The scheduler's Sequence (shared; it outlives the scheduler's hold): the prompt, then this
  // sequence's tokens. Output token k is seq->tokens[prompt_len + k], k < num_out.
  std::shared_ptr<const Sequence> seq;
  int num_out = 0;      // output tokens (a final EOS / stop token is not one)
  SequenceState state;
  StreamingText text;
  SequenceOutput out;   // text, finish_reason, logprobs; token_ids filled by take_result
  std::string unsent;   // text that became safe, not yet reported (flush)
  size_t streamed = 0;  // output tokens already reported to the stream callback
  bool done = false;
  bool done_reported = false;
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
  int prompt_len = 0;                // the prompt: seqs[0].seq->tokens[0, prompt_len)
  std::vector<EngineSequence> seqs;  // params.num_generated_sequences() of them; seqs[0] runs the prompt
  bool forked = false;
  StreamFn on_text;
  RequestResult result;
  int steps_in_flight = 0;  // launched steps with a sequence of it, not yet finished: it stays until 0

  // Sets up params.num_generated_sequences() sequences: sampling state, stop strings, and a grammar
  // matcher under params.constraint.
  void init_sequences(std::span<const int> prompt, std::span<const int> eos_ids);
  // A child that ended on its first token (drawn from the prompt's row) is never scheduled: its
  // Sequence is made here, the prompt and that token when it is an output token.
  void keep_unscheduled(int child, std::optional<int32_t> first);
  // Records sequence `child`'s new token (already appended to its state by the sampler) and
  // decides whether it ends: a stop token (not part of the output), a stop string (the text is
  // cut before it), max_tokens, or the end of the context. Collects the text that became safe.
  // Returns whether the token is an output token (the caller hands those to the scheduler).
  // matched: the sequence's grammar matcher has accepted the token already (DrawOutcome::matched).
  bool accept_token(int child, const SampleResult& res, const StopContext& stop, double now, bool matched = false);
  // Ends `child` with `reason` and collects the rest of its text (no-op when it is done).
  void finish_sequence(int child, const std::string& reason);
  // Reports `child`'s collected text and its output tokens not yet reported (which the shared
  // Sequence holds by now) to the stream callback, with `done` once it has ended.
  void flush(int child);
  // Structured output's jump-forward: the one token sequence `child`'s grammar allows next (its mask
  // filled), or -1 when it allows several, none, or only a stop token (left to the draw).
  int forced_token(int child, std::span<const int> eos_ids, int vocab);
  // Output tokens of sequence `child`: a view of its Sequence.
  std::span<const int32_t> output(int child) const;
  // The prompt: the head of the first sequence's tokens (every sequence starts with it).
  std::span<const int32_t> prompt() const {
    return std::span<const int32_t>(seqs[0].seq->tokens).first(size_t(prompt_len));
  }
  // Ends every sequence with finish_reason "error" (no stream event: the error is the last word).
  void fail(const std::string& message);
  bool all_done() const;
  // The result, once all_done(): the n best of best_of by cumulative logprob (each streamed now,
  // whole), or all n in order.
  RequestResult take_result(double now);
};

}  // namespace llmctl
