// A checkpoint of random f32 weights built from the Llama tensor list (llama_tensors.h): the small
// models tests and tools make for themselves.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/checkpoint.h"

namespace llmctl {

// Every tensor of model_tensor_specs(c) in f32: N(0, stddev), norms 1 + N(0, stddev), drawn in
// list order from std::mt19937(seed).
Checkpoint random_checkpoint(const ModelConfig& c, uint32_t seed, float stddev);

}  // namespace llmctl
