// Backend::sample on the host: the reference for the device kernels (the parity table's CPU row).
// Each job's edits, then the host sampler's own stages (sampling_stages.h), so a job draws the
// same token as engine/sample's sample() does for the sequence it was made from.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/backend/backend.h"

namespace llmctl {

// logits: host f32 [R, width]; one token per job, -1 where every candidate is suppressed.
std::vector<int32_t> cpu_sample(const Tensor& logits, const std::vector<SampleJob>& jobs);

}  // namespace llmctl
