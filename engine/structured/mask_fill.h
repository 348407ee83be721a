// Token masks of a step's constrained sequences, filled on a thread of their own while the step's
// forward runs (the engine submits the forward right after starting this; the sampler waits for
// the masks before it draws: StepSampling::masks_ready).
#pragma once
#include <cstdint>
#include <future>
#include <span>
#include <vector>

#include "engine/structured/constraint.h"

namespace llmctl {

struct MaskJob {
  ConstraintMatcher* matcher = nullptr;
  std::span<uint32_t> words;  // matcher->mask_words() words, kept alive until the future is ready
};

// Ready when every job's mask is filled. A matcher that throws leaves its mask empty (nothing
// allowed), so that its draw fails alone.
std::shared_future<void> fill_masks_async(std::vector<MaskJob> jobs);

}  // namespace llmctl
