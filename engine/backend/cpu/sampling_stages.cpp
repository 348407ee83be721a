#include "engine/backend/cpu/sampling_stages.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "engine/backend/cpu/vec_math.h"
#include "engine/core/error.h"

namespace llmctl {

int argmax(const float* logits, int vocab) {
  const float m = max_value(logits, vocab);
  const float* hit = std::find(logits, logits + vocab, m);
  return hit == logits + vocab ? 0 : int(hit - logits);  // all NaN: token 0
}

namespace {
// Sort keys: a larger key ranks first. High half: the value's bits made order-preserving as an
// unsigned integer; low half: the complement of the position, so ties go to the lower position.
uint64_t rank_key(float v, uint32_t pos) {
  uint32_t b = std::bit_cast<uint32_t>(v);
  b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return (uint64_t(b) << 32) | uint64_t(~pos);
}

void normalize(std::vector<float>& probs) {
  double total = 0;
  for (float x : probs) total += x;
  LLM_CHECK(total > 0 && std::isfinite(total)) << "no token has positive probability";
  const float inv = float(1.0 / total);
  for (float& x : probs) x *= inv;
}

// Keeps, in place and in order, the candidates whose key is at least cutoff; renormalizes.
void keep_from(Candidates& c, uint64_t cutoff) {
  size_t j = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    if (rank_key(c.probs[i], uint32_t(i)) < cutoff) continue;
    c.ids[j] = c.ids[i];
    c.probs[j] = c.probs[i];
    ++j;
  }
  c.ids.resize(j);
  c.probs.resize(j);
  normalize(c.probs);
}

// Key of the k-th largest logit (ties to the lower id): the bar for the top k.
uint64_t kth_key(const float* logits, int vocab, int k) {
  thread_local std::vector<uint64_t> keys;
  keys.clear();
  if (k <= 256) {  // one pass; the heap's minimum is the bar a newcomer must clear
    for (int i = 0; i < k; ++i) keys.push_back(rank_key(logits[i], uint32_t(i)));
    std::make_heap(keys.begin(), keys.end(), std::greater<>());
    for (int i = k; i < vocab; ++i) {
      const uint64_t key = rank_key(logits[i], uint32_t(i));
      if (key > keys.front()) {
        std::pop_heap(keys.begin(), keys.end(), std::greater<>());
        keys.back() = key;
        std::push_heap(keys.begin(), keys.end(), std::greater<>());
      }
    }
    return keys.front();
  }
  keys.resize(vocab);
  for (int i = 0; i < vocab; ++i) keys[i] = rank_key(logits[i], uint32_t(i));
  std::nth_element(keys.begin(), keys.begin() + (k - 1), keys.end(), std::greater<>());
  return keys[k - 1];
}
}  // namespace

void temperature_top_k(const float* logits, int vocab, float temperature, int top_k, Candidates& c) {
  LLM_CHECK(temperature > 0) << "temperature " << temperature;
  c.ids.clear();
  c.probs.clear();
  if (top_k > 0 && top_k < vocab) {
    const uint64_t bar = kth_key(logits, vocab, top_k);
    for (int i = 0; i < vocab; ++i)
      if (rank_key(logits[i], uint32_t(i)) >= bar) {
        c.ids.push_back(i);
        c.probs.push_back(logits[i]);
      }
    const float m = max_value(c.probs.data(), int(c.size()));
    LLM_CHECK(std::isfinite(m)) << "every token is suppressed (max logit " << m << ")";
    exp_shifted(c.probs.data(), int(c.size()), m, 1.0f / temperature, c.probs.data());
  } else {
    c.ids.resize(vocab);
    std::iota(c.ids.begin(), c.ids.end(), 0);
    c.probs.resize(vocab);
    const float m = max_value(logits, vocab);
    LLM_CHECK(std::isfinite(m)) << "every token is suppressed (max logit " << m << ")";
    exp_shifted(logits, vocab, m, 1.0f / temperature, c.probs.data());
  }
  normalize(c.probs);  // tokens that underflowed to 0 stay, and are never drawn
}

void apply_top_p(Candidates& c, float top_p) {
  if (top_p >= 1.0f || c.size() <= 1) return;
  const size_t size = c.size();
  // A probability's float bits order like the probability. Bucket by the top 12 bits (exponent and
  // 3 mantissa bits): one pass gives the mass per bucket; walking buckets from the top finds the
  // bucket where the mass reaches top_p; only that bucket is sorted. The kept set is the smallest
  // prefix of the order (probability desc, id asc) whose mass reaches top_p, as a full sort gives.
  constexpr int kShift = 20, kBuckets = 1 << (31 - kShift);
  auto bucket = [&](size_t i) { return int(std::bit_cast<uint32_t>(c.probs[i]) >> kShift); };  // probs >= 0
  double mass[kBuckets] = {};
  for (size_t i = 0; i < size; ++i) mass[bucket(i)] += c.probs[i];
  double cum = 0;
  int edge = kBuckets - 1;
  for (; edge > 0; --edge) {
    if (cum + mass[edge] >= double(top_p)) break;
    cum += mass[edge];
  }
  thread_local std::vector<uint64_t> edge_keys;
  edge_keys.clear();
  for (size_t i = 0; i < size; ++i)
    if (bucket(i) == edge) edge_keys.push_back(rank_key(c.probs[i], uint32_t(i)));
  std::sort(edge_keys.begin(), edge_keys.end(), std::greater<>());
  uint64_t cutoff = edge_keys.empty() ? 0 : edge_keys.back();
  for (uint64_t key : edge_keys) {
    cum += c.probs[~uint32_t(key)];
    if (cum >= double(top_p)) {
      cutoff = key;
      break;
    }
  }
  keep_from(c, cutoff);
}

void apply_min_p(Candidates& c, float min_p) {
  if (min_p <= 0.0f || c.size() <= 1) return;
  const float floor = min_p * max_value(c.probs.data(), int(c.size()));
  keep_from(c, rank_key(floor, ~0u));  // every p >= floor, whatever its position
}

int draw_candidate(const Candidates& c, double u) {
  LLM_CHECK(c.size() > 0) << "no candidates to draw from";
  double cum = 0;
  int last = -1;  // the last candidate that can be drawn
  for (size_t i = 0; i < c.size(); ++i) {
    if (c.probs[i] <= 0) continue;
    cum += c.probs[i];
    last = int(i);
    if (u < cum) return c.ids[i];
  }
  LLM_CHECK(last >= 0) << "no candidate has positive probability";
  return c.ids[last];  // u within rounding of the total
}

}  // namespace llmctl
