// Turns one row of logits into a token for one sequence: the processing pipeline of
// logits_processors.h, then a draw from a counter-based generator keyed by (sequence seed, step),
// so a request's draws do not depend on anything else running in the same batch.
//
// Engine use, per sequence per step:
//   SequenceState st(params, prompt, seed, child_index, eos_ids);   // once, at admission
//   SampleResult r = sample(logits_row, vocab, params, st, st.num_generated());
//   if (is_stop_token(r.token, params, eos_ids)) ... ;  // r.token is already appended to st
#pragma once
#include <cstdint>

#include "engine/sample/logprobs.h"
#include "engine/sample/sampling_params.h"
#include "engine/sample/sequence_state.h"

namespace llmctl {

// Uniform in [0, 1) from (seed, counter): stateless, so draw i of a request is reproducible.
double counter_uniform(uint64_t seed, uint64_t counter);

// The chosen token with its raw logprob and rank, computed only when params.logprobs is set or
// best_of > n needs the cumulative logprob (otherwise logprob = 0, rank = 0); top holds
// params.logprobs entries (none when logprobs is unset or 0).
using SampleResult = TokenLogprobs;

// logits: [vocab], the model's raw row (not modified; processing works on a copy); vocab may be
// less than the row's width (the tokenizer's size for a model with padded embeddings): the ids past
// it are never drawn, as if their logits were -inf. step: index of
// the token being generated, the draw counter (normally state.num_generated()). Appends the chosen
// token and its logprob to state. Thread-safe: scratch buffers are per thread.
SampleResult sample(const float* logits, int vocab, const SamplingParams& params, SequenceState& state,
                    uint64_t step);

// Draws under a grammar may first try a token drawn without its mask and fill the mask only when
// the grammar refuses it (step_sampling.h, DrawSpec::matcher), where that gives the masked draw's
// distribution: greedy (the same token as the masked argmax), or a plain draw from the processed
// softmax without top-k / top-p / min-p (kept with probability p(t), redrawn under the mask
// otherwise: p(t) + (1 - Z) p(t) / Z = p(t) / Z, Z the allowed mass); and nothing read off the
// masked row (logprobs, best_of's ranking).
bool can_draw_unmasked(const SamplingParams& params);
// That first draw, from the unmasked row (counter `step`, as sample() would use); -1 when every
// token is suppressed. Appends nothing to state.
int draw_unmasked(const float* logits, int vocab, const SamplingParams& params, const SequenceState& state,
                  uint64_t step);
// The counter of the redraw under the mask after a refused unmasked draw at `step`: a uniform
// independent of the first draw's.
constexpr uint64_t redraw_counter(uint64_t step) { return step | (uint64_t(1) << 63); }

}  // namespace llmctl
