// Draws under a grammar without filling its token mask (a pass over the whole vocabulary), where
// that gives the masked draw's distribution exactly. The grammar is asked about single tokens
// instead (ConstraintMatcher::accept, and rollback after a probe):
//   greedy               the processed row's argmax, kept if the grammar accepts it: the masked argmax;
//   plain temperature    (no top-k / top-p / min-p) a draw from the processed softmax, kept if
//                        accepted, else redrawn under the mask with an independent uniform:
//                        p(t) + (1 - Z) p(t) / Z = p(t) / Z, Z the allowed mass;
//   top-k (1..64)        with any top-p / min-p: the masked row's candidates are its k best allowed
//                        ids, found by offering ids in rank order (at most 2k + 16); the draw among
//                        them is the masked draw (same candidates, same probabilities).
// Not where something is read off the masked row: logprobs, best_of's ranking. Used by sample_step
// for DrawSpec::matcher draws (step_sampling.h).
#pragma once
#include <cstdint>

#include "engine/sample/sampling_params.h"
#include "engine/sample/sequence_state.h"
#include "engine/structured/constraint.h"

namespace llmctl {

bool can_draw_unmasked(const SamplingParams& params);

struct UnmaskedDraw {
  int token = -1;                 // accepted by the matcher (it stays accepted); -1: not found
  uint64_t fallback_counter = 0;  // token -1: draw under the filled mask with this counter
};

// logits: the raw row; step: the draw's counter (state.num_generated()). Appends nothing to state;
// the matcher is unchanged when no token is returned.
UnmaskedDraw draw_unmasked(const float* logits, int vocab, const SamplingParams& params, const SequenceState& state,
                           uint64_t step, ConstraintMatcher& matcher);

}  // namespace llmctl
