// Prompt-lookup decoding (vLLM's "ngram" speculative method): the drafts are the tokens that
// followed the most recent earlier occurrence of the sequence's last n tokens, trying n from max_n
// down to min_n. Free to compute (no model), it pays off where the output repeats its context:
// code edits, lists, quotes, summaries.
#pragma once
#include "engine/spec/proposer.h"

namespace llmctl {

class NgramProposer final : public Proposer {
 public:
  // 1 <= min_n <= max_n; throws InputError otherwise.
  NgramProposer(int min_n = 2, int max_n = 4);

  // The occurrence may overlap the suffix it matched: the drafts then continue by copying from
  // themselves (LZ77-style), so a period p shorter than max_drafts still yields max_drafts tokens.
  std::vector<int32_t> propose(std::span<const int32_t> tokens, int max_drafts) const override;
  std::string name() const override;

 private:
  int min_n_, max_n_;
};

}  // namespace llmctl
