#include "engine/sample/logits_processors.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "engine/core/error.h"

namespace llmctl {

void apply_logit_bias(float* logits, int vocab, const SamplingParams& p) {
  for (const auto& [id, bias] : p.logit_bias) {
    LLM_CHECK(id >= 0 && id < vocab) << "logit_bias id " << id << " vocab " << vocab;
    logits[id] += bias;
  }
}

void apply_min_tokens(float* logits, int vocab, const SamplingParams& p, const SequenceState& s) {
  if (s.num_generated() >= p.min_tokens) return;
  for (int id : s.stop_ids)
    if (id >= 0 && id < vocab) logits[id] = -std::numeric_limits<float>::infinity();
}

void apply_presence_frequency(float* logits, int vocab, const SamplingParams& p, const SequenceState& s) {
  if (p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f) return;
  for (const auto& [id, count] : s.output_counts) {
    if (id < 0 || id >= vocab || count <= 0) continue;
    logits[id] -= p.presence_penalty + p.frequency_penalty * float(count);
  }
}

void apply_repetition_penalty(float* logits, int vocab, const SamplingParams& p, const SequenceState& s) {
  if (p.repetition_penalty == 1.0f) return;
  auto penalize = [&](int id) {
    if (id < 0 || id >= vocab) return;
    float& l = logits[id];
    l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
  };
  for (int id : s.prompt_ids) penalize(id);
  for (const auto& [id, count] : s.output_counts)
    if (!s.in_prompt(id)) penalize(id);  // once per id, whatever the count
}

void process_logits(float* logits, int vocab, const SamplingParams& p, const SequenceState& s) {
  apply_logit_bias(logits, vocab, p);
  apply_min_tokens(logits, vocab, p, s);
  apply_presence_frequency(logits, vocab, p, s);
  apply_repetition_penalty(logits, vocab, p, s);
}

int argmax(const float* logits, int vocab) { return int(std::max_element(logits, logits + vocab) - logits); }

namespace {
void normalize(std::vector<double>& probs) {
  double total = 0;
  for (double x : probs) total += x;
  LLM_CHECK(total > 0 && std::isfinite(total)) << "no token has positive probability";
  for (double& x : probs) x /= total;
}

// Keeps the candidates at positions order[0, n), restoring ascending ids.
void keep_positions(Candidates& c, std::vector<int>& order, int n) {
  order.resize(n);
  std::sort(order.begin(), order.end());  // positions ascend <=> ids ascend
  Candidates out;
  out.ids.reserve(n);
  out.probs.reserve(n);
  for (int i : order) {
    out.ids.push_back(c.ids[i]);
    out.probs.push_back(c.probs[i]);
  }
  normalize(out.probs);
  c = std::move(out);
}
}  // namespace

Candidates temperature_top_k(const float* logits, int vocab, float temperature, int top_k) {
  LLM_CHECK(temperature > 0) << "temperature " << temperature;
  Candidates c;
  if (top_k > 0 && top_k < vocab) {
    std::vector<int> idx(vocab);
    std::iota(idx.begin(), idx.end(), 0);
    auto higher = [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
    std::nth_element(idx.begin(), idx.begin() + (top_k - 1), idx.end(), higher);
    idx.resize(top_k);
    std::sort(idx.begin(), idx.end());
    c.ids = std::move(idx);
  } else {
    c.ids.resize(vocab);
    std::iota(c.ids.begin(), c.ids.end(), 0);
  }
  float m = -std::numeric_limits<float>::infinity();
  for (int id : c.ids) m = std::max(m, logits[id]);
  LLM_CHECK(std::isfinite(m)) << "every token is suppressed (max logit " << m << ")";
  const double inv_t = 1.0 / temperature;
  c.probs.resize(c.ids.size());
  for (size_t i = 0; i < c.ids.size(); ++i) c.probs[i] = std::exp((double(logits[c.ids[i]]) - m) * inv_t);
  // Drop what underflowed to zero: it can never be drawn, and the stages below stay smaller.
  std::vector<int> order;
  order.reserve(c.ids.size());
  for (size_t i = 0; i < c.ids.size(); ++i)
    if (c.probs[i] > 0) order.push_back(int(i));
  if (order.size() == c.ids.size())
    normalize(c.probs);
  else
    keep_positions(c, order, int(order.size()));
  return c;
}

void apply_top_p(Candidates& c, float top_p) {
  if (top_p >= 1.0f || c.size() <= 1) return;
  const int size = int(c.size());
  std::vector<int> order(size);  // positions into c
  std::iota(order.begin(), order.end(), 0);
  auto more_probable = [&](int a, int b) {
    return c.probs[a] > c.probs[b] || (c.probs[a] == c.probs[b] && c.ids[a] < c.ids[b]);
  };
  // Grow a sorted most-probable prefix [0, sorted) in chunks until its mass reaches top_p.
  double cum = 0;
  int sorted = 0, keep = size;
  for (int chunk = 64; sorted < size; chunk *= 4) {
    const int end = std::min(size, sorted + chunk);
    if (end < size) std::nth_element(order.begin() + sorted, order.begin() + end, order.end(), more_probable);
    std::sort(order.begin() + sorted, order.begin() + end, more_probable);
    for (; sorted < end; ++sorted) {
      cum += c.probs[order[sorted]];
      if (cum >= double(top_p)) break;
    }
    if (sorted < end) {  // reached top_p at position `sorted`
      keep = sorted + 1;
      break;
    }
  }
  keep_positions(c, order, keep);
}

void apply_min_p(Candidates& c, float min_p) {
  if (min_p <= 0.0f || c.size() <= 1) return;
  const double floor = double(min_p) * *std::max_element(c.probs.begin(), c.probs.end());
  std::vector<int> order;
  for (int i = 0; i < int(c.size()); ++i)
    if (c.probs[i] >= floor) order.push_back(i);
  keep_positions(c, order, int(order.size()));
}

Candidates truncate_candidates(const float* logits, int vocab, const SamplingParams& p) {
  Candidates c = temperature_top_k(logits, vocab, p.temperature, p.top_k);
  apply_top_p(c, p.top_p);
  apply_min_p(c, p.min_p);
  return c;
}

int draw_candidate(const Candidates& c, double u) {
  LLM_CHECK(c.size() > 0) << "no candidates to draw from";
  double cum = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    cum += c.probs[i];
    if (u < cum) return c.ids[i];
  }
  return c.ids.back();  // u within rounding of 1
}

}  // namespace llmctl
