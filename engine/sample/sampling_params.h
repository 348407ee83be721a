// Per-request sampling parameters (validated before a request is accepted).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace llmctl {

struct SamplingParams {
  float temperature = 1.0f;         // 0 = greedy
  int top_k = 0;                    // 0 = off
  float top_p = 1.0f;               // (0, 1]
  float min_p = 0.0f;               // [0, 1]
  float repetition_penalty = 1.0f;  // > 0; 1 = off (HF style: divides positive logits)
  std::optional<uint64_t> seed;     // same seed, same output
  int max_tokens = 256;
  std::vector<std::string> stop;    // stop strings, never part of the output
  bool ignore_eos = false;

  bool greedy() const { return temperature == 0.0f; }
  void validate() const;  // throws InputError naming the bad field
};

}  // namespace llmctl
