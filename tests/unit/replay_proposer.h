// ReplayProposer: drafts taken from known continuations, some corrupted on purpose, so that a
// speculative run on a random model (which rarely repeats itself) both accepts and rejects drafts.
#pragma once
#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/core/hash.h"
#include "engine/spec/proposer.h"

namespace llmctl::test {

// Proposes what follows `tokens` in one of the reference sequences (prompt + a run's output) it has
// as a prefix, with the draft at absolute position p replaced when hash(p, salt) % corrupt_one_in
// == 0 (0: never). A sequence the references do not know gets no drafts.
class ReplayProposer final : public Proposer {
 public:
  ReplayProposer(std::vector<std::vector<int32_t>> refs, int corrupt_one_in, uint64_t salt = 1)
      : refs_(std::move(refs)), corrupt_one_in_(corrupt_one_in), salt_(salt) {}

  std::vector<int32_t> propose(std::span<const int32_t> tokens, int max_drafts) const override {
    ++*calls_;
    for (const auto& ref : refs_) {
      if (ref.size() <= tokens.size() || !std::equal(tokens.begin(), tokens.end(), ref.begin())) continue;
      std::vector<int32_t> d;
      for (size_t p = tokens.size(); p < ref.size() && int(d.size()) < max_drafts; ++p) {
        int32_t t = ref[p];
        if (corrupt_one_in_ > 0 && mix64(p * 0x9e37 + salt_) % uint64_t(corrupt_one_in_) == 0) t = (t + 1) % 200;
        d.push_back(t);
      }
      return d;
    }
    return {};
  }
  std::string name() const override { return "replay"; }
  int calls() const { return *calls_; }

 private:
  std::vector<std::vector<int32_t>> refs_;
  int corrupt_one_in_;
  uint64_t salt_;
  std::shared_ptr<int> calls_ = std::make_shared<int>(0);
};

}  // namespace llmctl::test
