#include "engine/sample/unmasked_draw.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "engine/core/error.h"
#include "engine/sample/logits_processors.h"
#include "engine/sample/sampler.h"

namespace llmctl {

namespace {

constexpr int kMaxProbedTopK = 64;
// The redraw after a refused plain-temperature draw: a counter no first draw uses.
constexpr uint64_t redraw_counter(uint64_t step) { return step | (uint64_t(1) << 63); }

bool untruncated(const SamplingParams& p) { return p.top_k <= 0 && p.top_p >= 1.0f && p.min_p <= 0.0f; }

// Whether the grammar takes `id` next, leaving it as it was.
bool probe(ConstraintMatcher& m, int id) {
  if (!m.accept(id)) return false;
  m.rollback(1);
  return true;
}

// Top-k under the mask: the k best allowed ids of `work` (processed logits), ranked as the masked
// row's top-k ranks them (higher logit first, ties by lower id), then the draw among them.
UnmaskedDraw draw_top_k(const float* work, int vocab, const SamplingParams& p, const SequenceState& state,
                        uint64_t step, ConstraintMatcher& m) {
  const int k = std::min(p.top_k, vocab);
  const int probes = std::min(2 * k + 16, vocab);
  const auto value = [&](int id) { return std::isnan(work[id]) ? -INFINITY : work[id]; };
  const auto better = [&](int a, int b) { return value(a) > value(b) || (value(a) == value(b) && a < b); };
  thread_local std::vector<int> ranked;
  ranked.resize(size_t(vocab));
  std::iota(ranked.begin(), ranked.end(), 0);
  std::nth_element(ranked.begin(), ranked.begin() + (probes - 1), ranked.end(), better);
  std::sort(ranked.begin(), ranked.begin() + probes, better);
  thread_local std::vector<int> found;
  found.clear();
  for (int i = 0; i < probes && int(found.size()) < k; ++i) {
    const int id = ranked[size_t(i)];
    if (value(id) == -INFINITY) break;  // the rest are suppressed: allowed ids past the probes may not be
    if (probe(m, id)) found.push_back(id);
  }
  if (int(found.size()) < k) return {-1, step};  // the masked draw, with the counter it would have used
  thread_local std::vector<float> row;
  row.assign(size_t(vocab), -INFINITY);
  for (int id : found) row[size_t(id)] = work[id];
  thread_local Candidates c;
  truncate_candidates(row.data(), vocab, p, c);
  const int token = draw_candidate(c, counter_uniform(state.seed, step));
  LLM_CHECK(m.accept(token)) << "draw_unmasked: the grammar refused a token it allowed";
  return {token, step};
}

}  // namespace

bool can_draw_unmasked(const SamplingParams& p) {
  const bool kind = p.greedy() || untruncated(p) || (p.top_k >= 1 && p.top_k <= kMaxProbedTopK);
  return kind && !p.logprobs && p.num_generated_sequences() <= p.n;
}

UnmaskedDraw draw_unmasked(const float* logits, int vocab, const SamplingParams& params, const SequenceState& state,
                           uint64_t step, ConstraintMatcher& matcher) {
  LLM_CHECK(vocab > 0 && can_draw_unmasked(params)) << "draw_unmasked: an empty row or a draw it cannot make";
  thread_local std::vector<float> work;
  work.assign(logits, logits + vocab);
  process_logits(work.data(), vocab, params, state);
  if (params.greedy()) {
    const int token = argmax(work.data(), vocab);
    if (work[size_t(token)] != -INFINITY && matcher.accept(token)) return {token, step};
    return {-1, step};
  }
  if (!untruncated(params)) return draw_top_k(work.data(), vocab, params, state, step, matcher);
  thread_local Candidates c;
  truncate_candidates(work.data(), vocab, params, c);
  if (c.size() > 0) {
    const int token = draw_candidate(c, counter_uniform(state.seed, step));
    if (matcher.accept(token)) return {token, step};
  }
  return {-1, redraw_counter(step)};
}

}  // namespace llmctl
