#include "engine/sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_set>

namespace llmctl {

namespace {
uint64_t mix64(uint64_t z) {  // splitmix64 finalizer
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
}  // namespace

double counter_uniform(uint64_t seed, uint64_t counter) {
  uint64_t h = mix64(seed + 0x9e3779b97f4a7c15ULL * (counter + 1));
  h = mix64(h ^ (counter * 0xd1b54a32d192ed03ULL));
  return double(h >> 11) * 0x1.0p-53;
}

std::vector<float> log_softmax(const float* logits, int vocab) {
  float m = *std::max_element(logits, logits + vocab);
  double sum = 0;
  for (int i = 0; i < vocab; ++i) sum += std::exp(double(logits[i]) - m);
  const double lse = m + std::log(sum);
  std::vector<float> out(vocab);
  for (int i = 0; i < vocab; ++i) out[i] = float(double(logits[i]) - lse);
  return out;
}

int sample_token(float* logits, int vocab, const SamplingParams& p, const std::vector<int>& history, uint64_t seed,
                 uint64_t step) {
  if (p.repetition_penalty != 1.0f) {
    std::unordered_set<int> seen(history.begin(), history.end());
    for (int id : seen) {
      if (id < 0 || id >= vocab) continue;
      float& l = logits[id];
      l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
    }
  }
  if (p.greedy()) return int(std::max_element(logits, logits + vocab) - logits);  // first max on ties

  // Candidates sorted by logit (ties by id, so the order is deterministic).
  std::vector<int> idx(vocab);
  std::iota(idx.begin(), idx.end(), 0);
  auto by_logit = [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  int keep = vocab;
  if (p.top_k > 0 && p.top_k < vocab) {
    keep = p.top_k;
    std::partial_sort(idx.begin(), idx.begin() + keep, idx.end(), by_logit);
  } else {
    std::sort(idx.begin(), idx.end(), by_logit);
  }
  // Probabilities at temperature T over the kept candidates.
  const double inv_t = 1.0 / p.temperature;
  const double m = logits[idx[0]];
  std::vector<double> prob(keep);
  double total = 0;
  for (int i = 0; i < keep; ++i) total += prob[i] = std::exp((logits[idx[i]] - m) * inv_t);
  for (double& x : prob) x /= total;
  if (p.top_p < 1.0f) {  // smallest prefix whose mass reaches top_p
    double cum = 0;
    int n = 0;
    while (n < keep) {
      cum += prob[n++];
      if (cum >= p.top_p) break;
    }
    keep = n;
  }
  if (p.min_p > 0.0f) {  // drop tokens below min_p times the top probability
    const double floor = p.min_p * prob[0];
    int n = 1;
    while (n < keep && prob[n] >= floor) ++n;
    keep = n;
  }
  double mass = 0;
  for (int i = 0; i < keep; ++i) mass += prob[i];
  const double u = counter_uniform(seed, step) * mass;
  double cum = 0;
  for (int i = 0; i < keep; ++i) {
    cum += prob[i];
    if (u < cum) return idx[i];
  }
  return idx[keep - 1];
}

}  // namespace llmctl
