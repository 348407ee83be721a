// The tensors of a Llama-architecture checkpoint (HF names and shapes) for a config, and a
// checkpoint of random f32 weights built from that list: the small models tests and tools make
// for themselves.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/checkpoint.h"

namespace llmctl {

struct LlamaTensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  bool norm = false;  // an RMSNorm weight (centred on 1, not 0)
};

// Embedding, final norm, then each layer's norms and projections; lm_head last when untied.
std::vector<LlamaTensorSpec> llama_tensor_specs(const ModelConfig& c);

// Every tensor of llama_tensor_specs(c) in f32: N(0, stddev), norms 1 + N(0, stddev), drawn in
// list order from std::mt19937(seed).
Checkpoint random_checkpoint(const ModelConfig& c, uint32_t seed, float stddev);

}  // namespace llmctl
