// Non-finite dense weights are refused at load: a NaN norm weight or an inf in an embedding would
// otherwise run, and every token after it would be garbage (`<|endoftext|>` x N) with exit 0.
#pragma once
#include "engine/model/checkpoint.h"

namespace llmctl {

// One pass over every f32 / f16 / bf16 tensor of ck.tensors (the quantized weights' scales are
// checked as they are decoded: GroupAffineWeight::validate). Throws InputError naming the tensor,
// the element's index and its value.
void refuse_non_finite_weights(const Checkpoint& ck);

}  // namespace llmctl
