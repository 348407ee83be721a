#include "engine/sample/sequence_state.h"

#include <algorithm>
#include <numeric>

#include "engine/core/error.h"
#include "engine/core/hash.h"

namespace llmctl {

uint64_t child_seed(uint64_t request_seed, int index) {
  LLM_CHECK(index >= 0) << "child index " << index;
  if (index == 0) return request_seed;
  return mix64(mix64(request_seed ^ 0x5851f42d4c957f2dULL) + 0x9e3779b97f4a7c15ULL * uint64_t(index));
}

SequenceState::SequenceState(const SamplingParams& params, std::span<const int> prompt, uint64_t request_seed,
                             int child_index, std::span<const int> eos_ids)
    : seed(child_seed(request_seed, child_index)), prompt_ids(prompt.begin(), prompt.end()) {
  std::sort(prompt_ids.begin(), prompt_ids.end());
  prompt_ids.erase(std::unique(prompt_ids.begin(), prompt_ids.end()), prompt_ids.end());
  stop_ids = params.stop_token_ids;
  if (!params.ignore_eos) stop_ids.insert(stop_ids.end(), eos_ids.begin(), eos_ids.end());
  std::sort(stop_ids.begin(), stop_ids.end());
  stop_ids.erase(std::unique(stop_ids.begin(), stop_ids.end()), stop_ids.end());
}

bool SequenceState::in_prompt(int id) const { return std::binary_search(prompt_ids.begin(), prompt_ids.end(), id); }

void SequenceState::append(int token, float logprob) {
  ++generated;
  ++output_counts[token];
  cumulative_logprob += logprob;
}

bool is_stop_token(int token, const SamplingParams& params, std::span<const int> eos_ids) {
  if (!params.ignore_eos && std::find(eos_ids.begin(), eos_ids.end(), token) != eos_ids.end()) return true;
  return std::find(params.stop_token_ids.begin(), params.stop_token_ids.end(), token) != params.stop_token_ids.end();
}

std::vector<int> best_of_ranking(std::span<const double> cumulative_logprobs, int n) {
  std::vector<int> idx(cumulative_logprobs.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](int a, int b) { return cumulative_logprobs[a] > cumulative_logprobs[b]; });
  if (n >= 0 && n < int(idx.size())) idx.resize(n);
  return idx;
}

}  // namespace llmctl
