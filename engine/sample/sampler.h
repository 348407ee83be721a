// Turns one row of logits into a token: penalties, temperature, top-k, top-p, min-p, then a draw
// from a counter-based generator keyed by (seed, step), so a request's draws do not depend on
// anything else running in the same batch.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/sample/sampling_params.h"

namespace llmctl {

// Uniform in [0, 1) from (seed, counter): stateless, so draw i of a request is reproducible.
double counter_uniform(uint64_t seed, uint64_t counter);

// logits: [V] (modified in place). history: prompt and generated ids (for the repetition penalty).
// step: index of the token being generated (the draw counter).
int sample_token(float* logits, int vocab, const SamplingParams& p, const std::vector<int>& history, uint64_t seed,
                 uint64_t step);

// log-softmax of a logits row (for logprobs and the golden tests), in double for accuracy.
std::vector<float> log_softmax(const float* logits, int vocab);

}  // namespace llmctl
