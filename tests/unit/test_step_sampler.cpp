// sample_step (engine/sample/step_sampler.h), the one place where logits become tokens: token
// masks, speculative chains, failures that stay with their draw, and prompt rows, on the CPU
// backend against the host sampler called row by row.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/sample/logits_processors.h"
#include "engine/sample/logprobs.h"
#include "engine/sample/sampler.h"
#include "engine/sample/step_sampler.h"
#include "engine/backend/cpu/sampling_stages.h"
#include "engine/structured/constraint.h"

using namespace llmctl;

namespace {

constexpr int kVocab = 70;  // the tokenizer's ids; rows are wider (a padded vocabulary)
constexpr int kWidth = 80;

Tensor random_rows(int rows, uint32_t seed) {
  Tensor t = Tensor::empty_host(DType::F32, {rows, kWidth});
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 3.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = d(rng);
  return t;
}

std::vector<uint32_t> mask_of(const std::set<int>& ids) {
  std::vector<uint32_t> m((kVocab + 31) / 32, 0);
  for (int id : ids) m[size_t(id) / 32] |= 1u << (id % 32);
  return m;
}

DrawSpec spec(const SamplingParams& p, SequenceState& st, int row) {
  DrawSpec d;
  d.params = &p, d.state = &st, d.row = row;
  return d;
}

int masked_argmax(const float* row, const std::set<int>& allowed) {
  int best = -1;
  for (int id : allowed)
    if (best < 0 || row[id] > row[best]) best = id;
  return best;
}

}  // namespace

TEST_CASE("sample_step: a token mask confines greedy and sampled draws to its ids; an empty mask allows all") {
  auto be = make_cpu_backend(1);
  const Tensor logits = random_rows(3, 1);
  const std::set<int> allowed = {3, 17, 40, 41, 69};
  const std::vector<uint32_t> mask = mask_of(allowed);
  SamplingParams greedy;
  greedy.temperature = 0;
  SamplingParams hot;
  hot.temperature = 1.5f;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    SequenceState a(greedy, {}, seed, 0, {}), b(hot, {}, seed, 0, {}), c(hot, {}, seed, 0, {}), ref(hot, {}, seed, 0, {});
    StepSampling s;
    s.vocab = kVocab;
    s.draws = {spec(greedy, a, 0), spec(hot, b, 1), spec(hot, c, 2)};
    s.draws[0].allowed = mask;
    s.draws[1].allowed = mask;
    const StepOutput out = sample_step(*be, logits, s);
    REQUIRE(out.draws.size() == 3);
    CHECK(out.draws[0].res.token == masked_argmax(logits.ptr<float>(), allowed));
    CHECK(allowed.count(out.draws[1].res.token) == 1);
    CHECK((a.num_generated() == 1 && a.count(out.draws[0].res.token) == 1));
    CHECK((b.num_generated() == 1 && b.count(out.draws[1].res.token) == 1));
    // No mask: the host sampler's own draw for this seed and step.
    CHECK(out.draws[2].res.token == sample(logits.ptr<float>() + 2 * kWidth, kVocab, hot, ref, 0).token);
  }
}

TEST_CASE("sample_step: a masked draw's logprobs are those of the masked row (the mask applies first)") {
  auto be = make_cpu_backend(1);
  const Tensor logits = random_rows(1, 2);
  SamplingParams p;
  p.temperature = 0;
  p.logprobs = 2;
  const std::set<int> allowed = {5, 9};
  const std::vector<uint32_t> mask = mask_of(allowed);
  SequenceState st(p, {}, 7, 0, {});
  StepSampling s;
  s.vocab = kVocab;
  s.draws = {spec(p, st, 0)};
  s.draws[0].allowed = mask;
  const StepOutput out = sample_step(*be, logits, s);
  const float* row = logits.ptr<float>();
  const double lse = std::log(std::exp(double(row[5])) + std::exp(double(row[9])));
  const int tok = out.draws[0].res.token;
  CHECK(out.draws[0].res.logprob == doctest::Approx(double(row[tok]) - lse).epsilon(1e-5));
  REQUIRE(out.draws[0].res.top.size() == 2);
  CHECK(allowed.count(out.draws[0].res.top[1].id) == 1);
}

namespace {
// A grammar that allows a fixed set of ids at every position; counts its mask fills.
class SetMatcher final : public ConstraintMatcher {
 public:
  explicit SetMatcher(std::set<int> ids) : ids_(std::move(ids)) {}
  void fill_mask(std::span<uint32_t> words) override {
    ++fills;
    const std::vector<uint32_t> m = mask_of(ids_);
    std::copy(m.begin(), m.end(), words.begin());
  }
  bool accept(int32_t token) override { return ids_.count(token) == 1; }
  void rollback(int) override {}
  bool terminated() const override { return false; }
  bool next_byte_forced() override { return false; }
  size_t mask_words() const override { return (kVocab + 31) / 32; }
  int fills = 0;

 private:
  std::set<int> ids_;
};
}  // namespace

TEST_CASE("sample_step: a draw that asks the grammar about single tokens has the masked draw's distribution") {
  // DrawSpec::matcher (unmasked_draw.h). Greedy: the masked argmax, with a mask filled only where
  // the unmasked argmax is refused.
  auto be = make_cpu_backend(1);
  const Tensor logits = random_rows(1, 11);
  const float* row = logits.ptr<float>();
  std::vector<int> order(kVocab);
  for (int i = 0; i < kVocab; ++i) order[size_t(i)] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return row[a] > row[b]; });
  const std::set<int> allowed = {order[0], order[1], order[5], order[20], order[50]};  // the top one and a tail
  const std::set<int> refuses_top = {order[1], order[5], order[20], order[50]};
  SamplingParams greedy;
  greedy.temperature = 0;
  for (const std::set<int>* ids : {&allowed, &refuses_top}) {
    SetMatcher m(*ids);
    std::vector<uint32_t> buffer(m.mask_words());
    SequenceState st(greedy, {}, 3, 0, {});
    StepSampling s;
    s.vocab = kVocab;
    s.draws = {spec(greedy, st, 0)};
    s.draws[0].matcher = &m, s.draws[0].mask = buffer;
    const StepOutput out = sample_step(*be, logits, s);
    CHECK(out.draws[0].res.token == masked_argmax(row, *ids));
    CHECK(out.draws[0].matched == (ids == &allowed));
    CHECK(m.fills == (ids == &allowed ? 0 : 1));
  }
  // Sampled: frequencies over 40,000 draws (one per step counter) against the masked draw's
  // probabilities (the mask applied to the row, then the same truncation).
  const auto masked_probs = [&](const SamplingParams& p, const std::set<int>& ids) {
    std::vector<float> work(row, row + kVocab);
    for (int id = 0; id < kVocab; ++id)
      if (!ids.count(id)) work[size_t(id)] = -INFINITY;
    Candidates c;
    truncate_candidates(work.data(), kVocab, p, c);
    std::map<int, double> probs;
    for (size_t i = 0; i < c.size(); ++i) probs[c.ids[i]] += c.probs[i];
    return probs;
  };
  const auto check_draws = [&](const SamplingParams& p, const std::set<int>& ids, const std::string& what) {
    SetMatcher m(ids);
    std::vector<uint32_t> buffer(m.mask_words());
    std::map<int, int> counts;
    constexpr int kDraws = 40000;
    SequenceState st(p, {}, 5, 0, {});
    for (int i = 0; i < kDraws; ++i) {
      StepSampling s;
      s.vocab = kVocab;
      s.draws = {spec(p, st, 0)};
      s.draws[0].matcher = &m, s.draws[0].mask = buffer;
      const StepOutput out = sample_step(*be, logits, s);  // (each draw appends: the next one's counter)
      REQUIRE(out.draws[0].error.empty());
      ++counts[out.draws[0].res.token];
    }
    const std::map<int, double> want = masked_probs(p, ids);
    for (const auto& [id, n] : counts) CHECK_MESSAGE(want.count(id) == 1, what << ": id " << id << " drawn");
    for (const auto& [id, q] : want) {
      const double sigma = std::sqrt(q * (1 - q) / kDraws);
      CHECK_MESSAGE(std::abs(double(counts[id]) / kDraws - q) < 5 * sigma + 1e-9, what << ": id " << id << " p " << q);
    }
    MESSAGE(what << ": masks filled for " << m.fills << " of " << kDraws << " draws");
    return m.fills;
  };
  const std::set<int> tail = {order[1], order[3], order[8], order[20], order[50]};  // the top id refused
  SamplingParams hot;
  hot.temperature = 3.0f;  // (the rows' logits have a spread of 3: a flat enough distribution)
  hot.top_k = 0, hot.top_p = 1.0f, hot.min_p = 0.0f;
  const int plain_fills = check_draws(hot, tail, "temperature 3");
  CHECK(plain_fills > 0);
  CHECK(plain_fills < 40000);
  // Top-k: the k best allowed ids are found by asking about single ids; no mask where the allowed
  // ids are near the top, a mask each time where fewer than k are found.
  SamplingParams top_k = hot;
  top_k.top_k = 3, top_k.top_p = 0.9f, top_k.min_p = 0.02f;
  CHECK(check_draws(top_k, tail, "top-k 3, top-p 0.9, min-p 0.02") == 0);
  top_k.top_k = 6;  // five ids allowed: never six found
  CHECK(check_draws(top_k, tail, "top-k 6 of 5 allowed") == 40000);
}


TEST_CASE("sample_step: a mask that allows nothing fails its own draw only") {
  auto be = make_cpu_backend(1);
  const Tensor logits = random_rows(2, 3);
  SamplingParams p;
  p.temperature = 0.8f;
  const std::vector<uint32_t> none((kVocab + 31) / 32, 0);
  const std::vector<uint32_t> past_vocab = mask_of({75, 79});  // ids past the vocabulary are never drawn
  for (const auto* mask : {&none, &past_vocab}) {
    SequenceState a(p, {}, 1, 0, {}), b(p, {}, 2, 0, {});
    StepSampling s;
    s.vocab = kVocab;
    s.draws = {spec(p, a, 0), spec(p, b, 1)};
    s.draws[0].allowed = *mask;
    const StepOutput out = sample_step(*be, logits, s);
    CHECK_FALSE(out.draws[0].error.empty());
    CHECK(a.num_generated() == 0);
    CHECK(out.draws[1].error.empty());
    CHECK(b.num_generated() == 1);
  }
}

TEST_CASE("sample_step: a chain draws its rows while each draws its draft, then skips the rest") {
  auto be = make_cpu_backend(1);
  const Tensor logits = random_rows(4, 4);
  SamplingParams p;
  p.temperature = 0;
  std::vector<int> best;
  for (int r = 0; r < 4; ++r) best.push_back(argmax(logits.ptr<float>() + r * kWidth, kVocab));
  // drafts: rows 0 and 1 hold the greedy tokens, row 2 does not: rows 0..2 are drawn, row 3 skipped
  const int wrong = (best[2] + 1) % kVocab;
  SequenceState st(p, {}, 1, 0, {});
  StepSampling s;
  s.vocab = kVocab;
  const int drafts[] = {best[0], best[1], wrong, -1};
  for (int r = 0; r < 4; ++r) {
    DrawSpec d = spec(p, st, r);
    d.draft = drafts[r];
    d.chained = r > 0;
    s.draws.push_back(d);
  }
  const StepOutput out = sample_step(*be, logits, s);
  for (int r = 0; r < 3; ++r) {
    CHECK_FALSE(out.draws[size_t(r)].skipped);
    CHECK(out.draws[size_t(r)].res.token == best[size_t(r)]);
  }
  CHECK(out.draws[3].skipped);
  CHECK(st.num_generated() == 3);
  for (int t : {best[0], best[1], best[2]}) CHECK(st.count(t) >= 1);

  // A draft that is a stop token ends the chain even when drawn.
  SequenceState st2(p, {}, 1, 0, {});
  const int eos[] = {best[0]};
  s.eos_ids = eos;
  for (DrawSpec& d : s.draws) d.state = &st2;
  const StepOutput out2 = sample_step(*be, logits, s);
  CHECK(out2.draws[0].res.token == best[0]);
  CHECK(out2.draws[1].skipped);
  CHECK(st2.num_generated() == 1);
}

TEST_CASE("sample_step: prompt rows are the raw logprobs of their targets, ids past the vocabulary left out") {
  auto be = make_cpu_backend(1);
  const Tensor logits = random_rows(3, 5);
  StepSampling s;
  s.vocab = kVocab;
  s.prompt_rows = {{2, 11, 3}, {0, 69, 0}};
  const StepOutput out = sample_step(*be, logits, s);
  REQUIRE(out.prompt_rows.size() == 2);
  const TokenLogprobs want0 = token_logprobs(logits.ptr<float>() + 2 * kWidth, kVocab, 11, 3);
  CHECK(out.prompt_rows[0].token == 11);
  CHECK(out.prompt_rows[0].logprob == want0.logprob);
  CHECK(out.prompt_rows[0].rank == want0.rank);
  CHECK(out.prompt_rows[0].top.size() == 3);
  CHECK(out.prompt_rows[1].logprob == token_logprobs(logits.ptr<float>(), kVocab, 69, 0).logprob);
}
