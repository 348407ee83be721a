// A BatchPlan as bytes, to send it from rank 0 to the other ranks of a multi-rank executor:
// the arrays in BatchPlan's order, each as [int64 count][int32 values], then max_blocks_per_seq,
// graph_context and micro_batches. decode_plan checks every count against the bytes it has (a short or long
// buffer throws Error), and the result is validated by the runner as any plan is.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/core/batch_plan.h"

namespace llmctl {

std::vector<uint8_t> encode_plan(const BatchPlan& plan);
BatchPlan decode_plan(const std::vector<uint8_t>& bytes);

}  // namespace llmctl
