#include "engine/sample/sampler.h"

#include <cmath>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/hash.h"
#include "engine/sample/logits_processors.h"

namespace llmctl {

double counter_uniform(uint64_t seed, uint64_t counter) {
  uint64_t h = mix64(seed + 0x9e3779b97f4a7c15ULL * (counter + 1));
  h = mix64(h ^ (counter * 0xd1b54a32d192ed03ULL));
  return double(h >> 11) * 0x1.0p-53;
}

SampleResult sample(const float* logits, int vocab, const SamplingParams& params, SequenceState& state,
                    uint64_t step) {
  LLM_CHECK(vocab > 0) << "empty logits row";
  // Scratch reused across calls on this thread (a row is ~50k entries; no state survives a call).
  thread_local std::vector<float> work;
  thread_local Candidates c;
  // A greedy draw nothing edits reads the row as it is (a decode step's serial work: the copy of
  // ~50k entries cost more than the arg max).
  const float* row = logits;
  if (!params.greedy() || edits_logits(params, state)) {
    work.assign(logits, logits + vocab);
    process_logits(work.data(), vocab, params, state);
    row = work.data();
  }
  int token;
  if (params.greedy()) {
    token = argmax(row, vocab);
    LLM_CHECK(row[token] != -INFINITY) << "every token is suppressed (no token can be drawn)";
  } else {
    truncate_candidates(row, vocab, params, c);
    token = draw_candidate(c, counter_uniform(state.seed, step));
  }
  // Logprobs cost two more passes over the row: only when asked for, or to rank best_of.
  SampleResult r;
  r.token = token;
  if (params.logprobs || params.num_generated_sequences() > params.n)
    r = token_logprobs(logits, vocab, token, params.logprobs.value_or(0));
  state.append(token, r.logprob);
  return r;
}

}  // namespace llmctl
