// The bridge from a sequence's sampling state to a device sampling job (Backend::sample): the
// edits of logits_processors.h stages 1-4 as a sparse list per token id, the truncation
// parameters, and the draw u = counter_uniform(seed, step), so that a sequence draws the same
// token on the device as sample() does on the host (see kernels/cuda/sampling.cuh for the one
// caveat: u within double rounding of a boundary).
#pragma once
#include <cstdint>

#include "engine/core/sample_job.h"
#include "engine/sample/sampling_params.h"
#include "engine/sample/sequence_state.h"

namespace llmctl {

// Whether a sequence's tokens can be drawn on the device: not when it needs the chosen token's
// logprob (logprobs, or best_of > n ranking by cumulative logprob), which needs the row on the host.
bool device_samplable(const SamplingParams& params);

// The job for draw `step` of the sequence in state s, from logits row `row`, drawing among ids
// [0, vocab) (vocab may be less than the row's width: see sample()).
SampleJob make_sample_job(const SamplingParams& params, const SequenceState& s, uint64_t step, int row, int vocab);

}  // namespace llmctl
