// Proposer: the seam for speculative decoding. Before a step, the Engine asks it for tokens likely
// to follow a decoding sequence (drafts); the step computes them together with the sequence's last
// token and the Engine keeps the drafts its own draws agree with (engine.h), so outputs are exactly
// those of a run without a proposer. A new method (n-gram lookup, a draft model, EAGLE heads) is a
// new Proposer, given to the Engine through EngineConfig::proposer: no edit of the Engine.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace llmctl {

class Proposer {
 public:
  virtual ~Proposer() = default;
  // tokens: the sequence's prompt then its generated tokens (the last one not yet computed).
  // Returns at most max_drafts tokens guessed to follow them, possibly none. Called from the engine
  // loop, once per decoding sequence per step; const so that one proposer may serve several engines.
  virtual std::vector<int32_t> propose(std::span<const int32_t> tokens, int max_drafts) const = 0;
  // For logs and reports, e.g. "ngram[1..4]".
  virtual std::string name() const = 0;
};

}  // namespace llmctl
