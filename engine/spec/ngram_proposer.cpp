#include "engine/spec/ngram_proposer.h"

#include <algorithm>

#include "engine/core/error.h"

namespace llmctl {

NgramProposer::NgramProposer(int min_n, int max_n) : min_n_(min_n), max_n_(max_n) {
  LLM_REQUIRE(min_n >= 1 && min_n <= max_n) << "n-gram sizes must satisfy 1 <= min (" << min_n << ") <= max ("
                                            << max_n << ")";
}

std::string NgramProposer::name() const {
  return "ngram[" + std::to_string(min_n_) + ".." + std::to_string(max_n_) + "]";
}

std::vector<int32_t> NgramProposer::propose(std::span<const int32_t> tokens, int max_drafts) const {
  const int N = int(tokens.size());
  std::vector<int32_t> drafts;
  if (max_drafts <= 0) return drafts;
  for (int n = std::min(max_n_, N - 1); n >= min_n_; --n) {
    const std::span<const int32_t> suffix = tokens.subspan(size_t(N - n));
    // Occurrences starting at i < N - n (earlier than the suffix itself), the most recent first.
    for (int i = N - n - 1; i >= 0; --i) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + i)) continue;
      // Token t after the occurrence is at i + n + t < N + t: in tokens, or an earlier draft.
      drafts.reserve(size_t(max_drafts));
      for (int t = 0; t < max_drafts; ++t) {
        const int src = i + n + t;
        drafts.push_back(src < N ? tokens[size_t(src)] : drafts[size_t(src - N)]);
      }
      return drafts;
    }
  }
  return drafts;
}

}  // namespace llmctl
