// Sampling stages 5-8 of engine/sample/logits_processors.h on a host row (temperature, top-k,
// top-p, min-p) and the draw, with no SamplingParams: shared by the host sampler and the CPU
// backend's Backend::sample, so both draw the same token from the same row.
#pragma once
#include <vector>

namespace llmctl {

// Tokens still in the running with their probabilities (normalized to sum to 1).
// Invariant between stages: ids ascending, probs[i] > 0 belongs to ids[i].
struct Candidates {
  std::vector<int> ids;
  std::vector<float> probs;
  size_t size() const { return ids.size(); }
};

// Stages 5 and 6: softmax at temperature (> 0) over the top_k largest logits (top_k <= 0: all).
// Selecting the top k needs no sort of the vocabulary (one pass with a bounded heap for small k,
// nth_element over packed keys otherwise), and only k exponentials are taken.
// c is overwritten (its capacity is reused: keep one per thread).
void temperature_top_k(const float* logits, int vocab, float temperature, int top_k, Candidates& c);
// Stage 7: a histogram of the probabilities finds the boundary in one pass; only the boundary
// bucket is sorted, never the whole set.
void apply_top_p(Candidates& c, float top_p);
// Stage 8: one pass, no sort. Stages 6-8 compact c in place, keeping ids ascending.
void apply_min_p(Candidates& c, float min_p);
// Inverse CDF walk in ascending id order: the first candidate whose cumulative probability
// exceeds u (u in [0, 1)); never a candidate of probability 0.
int draw_candidate(const Candidates& c, double u);

// Arg max, lowest id on ties.
int argmax(const float* logits, int vocab);

}  // namespace llmctl
