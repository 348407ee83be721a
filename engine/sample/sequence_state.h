// Per-sequence sampling state: what the penalties need (prompt ids, counts of generated ids), the
// sequence's own seed, and the cumulative logprob used to rank best_of candidates.
#pragma once
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/sample/sampling_params.h"

namespace llmctl {

// Seed of child `index` of a request (n > 1 / best_of): child 0 keeps the request's seed (so n = 1
// and the first of n draw the same stream); the others get distinct, reproducible seeds.
uint64_t child_seed(uint64_t request_seed, int index);

struct SequenceState {
  uint64_t seed = 0;                           // draw k of this sequence is counter_uniform(seed, k)
  std::vector<int> prompt_ids;                 // sorted, unique: the repetition penalty's prompt part
  std::vector<int> stop_ids;                   // suppressed before min_tokens: stop_token_ids + EOS
  int generated = 0;                           // tokens drawn so far (the engine keeps the ids)
  std::unordered_map<int, int> output_counts;  // id -> times generated (presence/frequency)
  double cumulative_logprob = 0;               // sum of the chosen tokens' raw logprobs

  // eos_ids: the model's end-of-sequence ids (dropped from stop_ids when params.ignore_eos).
  SequenceState(const SamplingParams& params, std::span<const int> prompt, uint64_t request_seed, int child_index,
                std::span<const int> eos_ids);
  SequenceState() = default;

  int num_generated() const { return generated; }
  int count(int id) const {
    auto it = output_counts.find(id);
    return it == output_counts.end() ? 0 : it->second;
  }
  bool in_prompt(int id) const;
  void append(int token, float logprob);
};

// Whether token ends the sequence: an EOS id (unless ignore_eos) or one of stop_token_ids.
bool is_stop_token(int token, const SamplingParams& params, std::span<const int> eos_ids);

// Indices of the n best of the candidates' cumulative logprobs (highest first; ties by index).
std::vector<int> best_of_ranking(std::span<const double> cumulative_logprobs, int n);

}  // namespace llmctl
