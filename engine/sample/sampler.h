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

}  // namespace llmctl
