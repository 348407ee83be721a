// Token masks of a step's constrained sequences: filled before the step's forward on the CPU
// backend (whose forward uses every core), or on a thread of their own while the forward runs
// where the host is free (a GPU forward; the sampler waits for them: StepSampling::masks_ready).
// Either way the jobs are spread over the host's cores.
#pragma once
#include <cstdint>
#include <future>
#include <span>
#include <vector>

#include "engine/structured/constraint.h"

namespace llmctl {

struct MaskJob {
  ConstraintMatcher* matcher = nullptr;
  std::span<uint32_t> words;  // matcher->mask_words() words, kept alive until the masks are filled
};

// Fills every job's mask, over up to the host's cores (at least 4 jobs per thread). A matcher that
// throws leaves its mask empty (nothing allowed), so that its draw fails alone.
void fill_masks(const std::vector<MaskJob>& jobs);

// The same on a thread of its own: ready when every mask is filled.
std::shared_future<void> fill_masks_async(std::vector<MaskJob> jobs);

}  // namespace llmctl
