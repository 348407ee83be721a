// The CUDA-graph padding policy for decode steps: a decode-only batch of S sequences is padded to
// a bucket of sequences and its block tables to a power-of-two context, so that few captured
// graphs serve every decode step.
#pragma once
#include <cstdint>

#include "engine/core/batch_plan.h"

namespace llmctl {

// The bucket a decode batch of `seqs` sequences is padded to; 0 past the largest bucket (no graph).
int decode_graph_bucket(int seqs);
// The context the padded plan's kernels are sized for: the plan's longest context (and block
// table width, and 512 tokens at least) rounded up to a power of two of blocks, in tokens.
int decode_graph_context(const BatchPlan& plan, int block_size);
// Whether the plan can replay a decode graph: decode-only, one logits row per sequence in order,
// and few enough sequences for a bucket.
bool graphable_decode(const BatchPlan& plan);

}  // namespace llmctl
