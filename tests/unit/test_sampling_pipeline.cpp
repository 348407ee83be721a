// Logits processors (each against a hand-computed result, and their order), logprobs, seeds and
// children, sampling statistics.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "engine/sample/logits_processors.h"
#include "engine/sample/logprobs.h"
#include "engine/sample/sampler.h"

using namespace llmctl;

namespace {
const float kInf = std::numeric_limits<float>::infinity();

std::vector<float> random_logits(int vocab, uint32_t seed, float scale = 3.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> l(vocab);
  for (float& x : l) x = d(rng);
  return l;
}

std::vector<float> logs(std::initializer_list<double> probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(float(std::log(p)));
  return l;
}

// Frequencies of n draws (steps 0..n-1) of one fresh sequence per draw.
std::map<int, double> frequencies(const std::vector<float>& l, const SamplingParams& p, uint64_t seed, int n) {
  std::map<int, double> f;
  for (int i = 0; i < n; ++i) {
    SequenceState st(p, {}, seed, 0, {});
    f[sample(l.data(), int(l.size()), p, st, i).token] += 1.0 / n;
  }
  return f;
}

Candidates softmax_top_k(const std::vector<float>& l, float temperature, int top_k) {
  Candidates c;
  temperature_top_k(l.data(), int(l.size()), temperature, top_k, c);
  return c;
}

Candidates truncated(const std::vector<float>& l, const SamplingParams& p) {
  Candidates c;
  truncate_candidates(l.data(), int(l.size()), p, c);
  return c;
}

std::vector<int> generate(const std::vector<float>& l, const SamplingParams& p, SequenceState& st, int steps) {
  std::vector<int> out;
  for (int i = 0; i < steps; ++i) out.push_back(sample(l.data(), int(l.size()), p, st, st.num_generated()).token);
  return out;
}
}  // namespace

TEST_CASE("logit_bias adds to the named logits") {
  SamplingParams p;
  p.logit_bias = {{0, 5.0f}, {2, -1.0f}};
  std::vector<float> l = {1, 2, 3};
  apply_logit_bias(l.data(), 3, p);
  CHECK(l == std::vector<float>{6, 2, 2});
}

TEST_CASE("min_tokens suppresses EOS and stop ids, then lets them through") {
  SamplingParams p;
  p.min_tokens = 2;
  p.stop_token_ids = {3};
  const std::vector<int> eos = {1};
  SequenceState st(p, {}, 0, 0, eos);
  std::vector<float> l = {0, 1, 2, 3, 4};
  apply_min_tokens(l.data(), 5, p, st);
  CHECK(l == std::vector<float>{0, -kInf, 2, -kInf, 4});
  st.append(0, 0);
  st.append(0, 0);
  l = {0, 1, 2, 3, 4};
  apply_min_tokens(l.data(), 5, p, st);
  CHECK(l == std::vector<float>{0, 1, 2, 3, 4});
  // ignore_eos: EOS is an ordinary token, only the stop id is held back.
  p.ignore_eos = true;
  SequenceState st2(p, {}, 0, 0, eos);
  apply_min_tokens(l.data(), 5, p, st2);
  CHECK(l == std::vector<float>{0, 1, 2, -kInf, 4});
}

TEST_CASE("min_tokens in sample: a dominant EOS and stop id wait until min_tokens") {
  SamplingParams p;
  p.temperature = 0;
  p.min_tokens = 3;
  p.stop_token_ids = {2};
  const std::vector<int> eos = {0};
  std::vector<float> l = {10, 1, 9, 2};  // EOS first, stop id second, then token 3
  SequenceState st(p, {}, 0, 0, eos);
  auto out = generate(l, p, st, 4);
  CHECK(out == std::vector<int>{3, 3, 3, 0});
  CHECK(is_stop_token(0, p, eos));
  CHECK(is_stop_token(2, p, eos));
  CHECK(!is_stop_token(3, p, eos));
  p.ignore_eos = true;
  CHECK(!is_stop_token(0, p, eos));
}

TEST_CASE("presence, frequency and repetition penalties") {
  SamplingParams p;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  const std::vector<int> prompt = {0, 0, 3};
  SequenceState st(p, prompt, 0, 0, {});
  for (int t : {1, 1, 1, 2}) st.append(t, 0);
  // Presence and frequency look at generated tokens only: the prompt's 0 and 3 are untouched.
  std::vector<float> l = {1, 1, 1, 1};
  apply_presence_frequency(l.data(), 4, p, st);
  CHECK(l[0] == 1.0f);
  CHECK(l[1] == doctest::Approx(1 - 0.5 - 3 * 0.25));
  CHECK(l[2] == doctest::Approx(1 - 0.5 - 0.25));
  CHECK(l[3] == 1.0f);
  // Repetition looks at prompt + generated, once per id whatever the count; divides positive
  // logits, multiplies negative ones.
  p.repetition_penalty = 2.0f;
  l = {2, -1, 4, 3, 5};
  apply_repetition_penalty(l.data(), 5, p, st);
  CHECK(l == std::vector<float>{1, -2, 2, 1.5f, 5});
}

TEST_CASE("stages 1-4 apply in the documented order") {
  // l = 3: bias +2 -> 5; presence 1 -> 4; repetition 2 -> 2. Repetition first would give
  // 1.5 + 2 - 1 = 2.5; repetition between bias and presence 5 / 2 - 1 = 1.5.
  SamplingParams p;
  p.logit_bias = {{0, 2.0f}};
  p.presence_penalty = 1.0f;
  p.repetition_penalty = 2.0f;
  SequenceState st(p, {}, 0, 0, {});
  st.append(0, 0);
  std::vector<float> l = {3, 0};
  process_logits(l.data(), 2, p, st);
  CHECK(l[0] == doctest::Approx(2.0));
  // min_tokens after the bias: a +100 bias cannot rescue a suppressed EOS.
  SamplingParams q;
  q.min_tokens = 1;
  q.logit_bias = {{1, 100.0f}};
  SequenceState s2(q, {}, 0, 0, std::vector<int>{1});
  l = {0, 0};
  process_logits(l.data(), 2, q, s2);
  CHECK(l[1] == -kInf);
}

TEST_CASE("temperature, top-k, top-p, min-p by hand") {
  // Temperature 0.5 squares the odds: {1, 2} -> {1, 4}.
  Candidates c = softmax_top_k(logs({1.0 / 3, 2.0 / 3}), 0.5f, 0);
  CHECK(c.ids == std::vector<int>{0, 1});
  CHECK(c.probs[0] == doctest::Approx(0.2));
  CHECK(c.probs[1] == doctest::Approx(0.8));
  // top-k keeps the k largest, ties to the lower id, ids ascending.
  std::vector<float> l = {1, 3, 2, 3};
  c = softmax_top_k(l, 1.0f, 2);
  CHECK(c.ids == std::vector<int>{1, 3});
  CHECK(c.probs[0] == doctest::Approx(0.5));
  c = softmax_top_k(l, 1.0f, 1);
  CHECK(c.ids == std::vector<int>{1});
  // top-p: smallest most-probable prefix reaching the mass, renormalized.
  c = softmax_top_k(logs({0.1, 0.4, 0.3, 0.2}), 1.0f, 0);
  apply_top_p(c, 0.6f);
  CHECK(c.ids == std::vector<int>{1, 2});
  CHECK(c.probs[0] == doctest::Approx(4.0 / 7));
  // min-p: p >= min_p * max p, one pass.
  c = softmax_top_k(logs({0.1, 0.4, 0.3, 0.2}), 1.0f, 0);
  apply_min_p(c, 0.45f);
  CHECK(c.ids == std::vector<int>{1, 2, 3});
  CHECK(c.probs[2] == doctest::Approx(0.2 / 0.9));
}

TEST_CASE("stages 5-8 apply in the documented order") {
  SamplingParams p;
  // Temperature before top-p: at T = 0.5 the top token alone holds 0.66 of the mass.
  p.top_p = 0.6f;
  CHECK(truncated(logs({0.5, 0.3, 0.2}), p).size() == 2);
  p.temperature = 0.5f;
  CHECK(truncated(logs({0.5, 0.3, 0.2}), p).size() == 1);
  // top-k before top-p: after k = 2 the top token holds 0.57 >= 0.5 (top-p first would keep two).
  p = {};
  p.top_k = 2;
  p.top_p = 0.5f;
  CHECK(truncated(logs({0.4, 0.3, 0.2, 0.1}), p).ids == std::vector<int>{0});
  // top-p before min-p: top-p 0.75 keeps three of {0.5, 0.2, 0.2, 0.1} and min-p 0.3 keeps them;
  // min-p first would drop 0.1, renormalize, and top-p would then keep two.
  p = {};
  p.top_p = 0.75f;
  p.min_p = 0.3f;
  CHECK(truncated(logs({0.5, 0.2, 0.2, 0.1}), p).ids == std::vector<int>{0, 1, 2});
}

TEST_CASE("top-p selection over a large vocabulary equals a full sort") {
  const int V = 49152;
  for (float top_p : {0.05f, 0.5f, 0.9f, 0.99f}) {
    auto l = random_logits(V, 11, 2.0f);
    Candidates c = softmax_top_k(l, 0.7f, 0);
    const Candidates all = c;
    apply_top_p(c, top_p);
    std::vector<int> order(V);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int b) {
      return all.probs[a] > all.probs[b] || (all.probs[a] == all.probs[b] && a < b);
    });
    double cum = 0;
    std::vector<int> want;
    for (int id : order) {
      want.push_back(id);
      cum += all.probs[id];
      if (cum >= top_p) break;
    }
    std::sort(want.begin(), want.end());
    CHECK(c.ids == want);
    CHECK(std::accumulate(c.probs.begin(), c.probs.end(), 0.0) == doctest::Approx(1.0));
  }
}

TEST_CASE("top-k over a large vocabulary with ties equals a full sort") {
  const int V = 49152;
  auto l = random_logits(V, 12, 2.0f);
  for (float& x : l) x = std::round(x * 2) / 2;  // many ties
  std::vector<int> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
  for (int k : {1, 40, 256, 257, 1000, V - 1}) {
    CAPTURE(k);
    std::vector<int> want(order.begin(), order.begin() + k);
    std::sort(want.begin(), want.end());
    CHECK(softmax_top_k(l, 1.0f, k).ids == want);
  }
}

TEST_CASE("logit_bias forces and bans a token") {
  auto l = random_logits(64, 3);
  SamplingParams p;
  p.logit_bias = {{17, 100.0f}};
  for (auto [id, f] : frequencies(l, p, 5, 500)) CHECK(id == 17);
  p.temperature = 0;
  SequenceState st(p, {}, 0, 0, {});
  CHECK(sample(l.data(), 64, p, st, 0).token == 17);
  p = {};
  const int top = argmax(l.data(), 64);
  p.logit_bias = {{top, -100.0f}};
  p.temperature = 0;
  SequenceState st2(p, {}, 0, 0, {});
  CHECK(sample(l.data(), 64, p, st2, 0).token != top);
}

TEST_CASE("raw logprobs: they sum to one, top-N is ordered with ties by id, and ignore processing") {
  const int V = 1000;
  auto l = random_logits(V, 21);
  l[5] = l[9] = l[700] = 30.0f;  // a three-way tie at the top
  auto ls = log_softmax(l.data(), V);
  double total = 0;
  for (float x : ls) total += std::exp(double(x));
  CHECK(total == doctest::Approx(1.0).epsilon(1e-6));
  TokenLogprobs r = token_logprobs(l.data(), V, 9, 20);
  CHECK(r.logprob == doctest::Approx(ls[9]));
  CHECK(r.rank == 2);  // behind 5, ahead of 700
  REQUIRE(r.top.size() == 20);
  CHECK(r.top[0].id == 5);
  CHECK(r.top[1].id == 9);
  CHECK(r.top[2].id == 700);
  for (size_t k = 1; k < r.top.size(); ++k) CHECK(r.top[k - 1].logprob >= r.top[k].logprob);
  std::vector<int> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
  for (int k = 0; k < 20; ++k) {
    CHECK(r.top[k].id == order[k]);
    CHECK(r.top[k].logprob == doctest::Approx(ls[order[k]]));
  }
  CHECK(token_logprobs(l.data(), V, order[V - 1], 0).rank == V);
  CHECK(token_logprobs(l.data(), V, order[V - 1], 0).top.empty());

  // sample reports the raw logprob whatever the temperature, bias or penalties.
  SamplingParams p;
  p.temperature = 0;
  p.logprobs = 3;
  p.logit_bias = {{42, 100.0f}};
  p.repetition_penalty = 1.5f;
  SequenceState st(p, std::vector<int>{42}, 0, 0, {});
  SampleResult s = sample(l.data(), V, p, st, 0);
  CHECK(s.token == 42);
  CHECK(s.logprob == doctest::Approx(ls[42]));
  CHECK(s.top.size() == 3);
  CHECK(st.cumulative_logprob == doctest::Approx(ls[42]));
  CHECK(st.num_generated() == 1);
  CHECK(st.count(42) == 1);
}

TEST_CASE("prompt logprobs over a [T, V] block") {
  const int T = 5, V = 300;
  std::vector<float> block;
  for (int t = 0; t < T; ++t) {
    auto row = random_logits(V, 100 + t);
    block.insert(block.end(), row.begin(), row.end());
  }
  const std::vector<int> targets = {3, 1, 4, 1, 5};
  auto out = prompt_logprobs(block.data(), T, V, targets, 2);
  REQUIRE(out.size() == T);
  for (int t = 0; t < T; ++t) {
    auto ls = log_softmax(block.data() + t * V, V);
    CHECK(out[t].token == targets[t]);
    CHECK(out[t].logprob == doctest::Approx(ls[targets[t]]));
    CHECK(out[t].top.size() == 2);
    CHECK(out[t].top[0].id == argmax(block.data() + t * V, V));
  }
}

TEST_CASE("seeded draws are reproducible and do not depend on what else is sampled") {
  auto l = random_logits(500, 8, 1.0f);
  SamplingParams p;
  p.top_k = 50;
  p.top_p = 0.9f;
  p.presence_penalty = 0.3f;
  p.logprobs = 2;
  const std::vector<int> prompt = {1, 2}, prompt2 = {7};
  SequenceState a(p, prompt, 1234, 0, {});
  auto alone = generate(l, p, a, 40);
  // The same request interleaved with another one (a "batch"): the same tokens.
  SequenceState b(p, prompt, 1234, 0, {}), other(p, prompt2, 99, 0, {});
  std::vector<int> interleaved;
  for (int i = 0; i < 40; ++i) {
    sample(l.data(), 500, p, other, other.num_generated());
    interleaved.push_back(sample(l.data(), 500, p, b, b.num_generated()).token);
  }
  CHECK(interleaved == alone);
  CHECK(b.cumulative_logprob == a.cumulative_logprob);
  CHECK(a.cumulative_logprob < 0);
  SequenceState c(p, prompt, 1235, 0, {});
  CHECK(generate(l, p, c, 40) != alone);
}

TEST_CASE("children of a request get different, reproducible streams") {
  CHECK(child_seed(77, 0) == 77);
  std::set<uint64_t> seeds;
  for (int i = 0; i < 1000; ++i) seeds.insert(child_seed(77, i));
  CHECK(seeds.size() == 1000);
  CHECK(child_seed(77, 3) == child_seed(77, 3));
  CHECK(child_seed(77, 1) != child_seed(78, 1));
  // The children's uniforms are uncorrelated.
  const int n = 20000;
  double sx = 0, sy = 0, sxy = 0, sxx = 0, syy = 0;
  for (int k = 0; k < n; ++k) {
    double x = counter_uniform(child_seed(5, 1), k), y = counter_uniform(child_seed(5, 2), k);
    sx += x, sy += y, sxy += x * y, sxx += x * x, syy += y * y;
  }
  const double cov = sxy / n - sx / n * sy / n;
  const double corr = cov / std::sqrt((sxx / n - sx * sx / n / n) * (syy / n - sy * sy / n / n));
  CHECK(std::abs(corr) < 0.03);
  // Whole sequences differ between children and repeat for the same child.
  auto l = random_logits(200, 4, 0.5f);
  SamplingParams p;
  p.n = 3;
  std::vector<std::vector<int>> outs;
  for (int child = 0; child < 3; ++child) {
    SequenceState s(p, {}, 5, child, {});
    outs.push_back(generate(l, p, s, 20));
    SequenceState again(p, {}, 5, child, {});
    CHECK(generate(l, p, again, 20) == outs.back());
  }
  CHECK(outs[0] != outs[1]);
  CHECK(outs[1] != outs[2]);
}

TEST_CASE("logprobs are computed when asked for, or when best_of needs them") {
  auto l = random_logits(100, 9);
  SamplingParams p;
  SequenceState s0(p, {}, 1, 0, {});
  CHECK(sample(l.data(), 100, p, s0, 0).rank == 0);  // not asked: not computed
  p.n = 2;
  p.best_of = 3;
  SequenceState s1(p, {}, 1, 0, {});
  SampleResult r = sample(l.data(), 100, p, s1, 0);
  CHECK(r.rank >= 1);
  CHECK(r.top.empty());
  CHECK(s1.cumulative_logprob == doctest::Approx(log_softmax(l.data(), 100)[r.token]));
}

TEST_CASE("best_of ranks by cumulative logprob") {
  const std::vector<double> cum = {-3.0, -1.0, -2.0, -1.0};
  CHECK(best_of_ranking(cum, 2) == std::vector<int>{1, 3});
  CHECK(best_of_ranking(cum, 4) == std::vector<int>{1, 3, 2, 0});
}

TEST_CASE("sampling statistics on 20k draws: temperature, top-k, top-p, min-p") {
  const int n = 20000;
  const auto l = logs({0.4, 0.3, 0.2, 0.1});
  SamplingParams p;
  auto near = [](double got, double want) { CHECK(got == doctest::Approx(want).epsilon(0.06)); };
  SUBCASE("temperature 1 follows the distribution") {
    auto f = frequencies(l, p, 1, n);
    near(f[0], 0.4), near(f[1], 0.3), near(f[2], 0.2), near(f[3], 0.1);
  }
  SUBCASE("temperature 0.5 squares the odds") {
    p.temperature = 0.5f;
    auto f = frequencies(l, p, 2, n);
    near(f[0], 16 / 30.0), near(f[1], 9 / 30.0), near(f[2], 4 / 30.0), near(f[3], 1 / 30.0);
  }
  SUBCASE("temperature 2 flattens") {
    p.temperature = 2.0f;
    const double z = std::sqrt(0.4) + std::sqrt(0.3) + std::sqrt(0.2) + std::sqrt(0.1);
    auto f = frequencies(l, p, 3, n);
    near(f[0], std::sqrt(0.4) / z), near(f[3], std::sqrt(0.1) / z);
  }
  SUBCASE("top-k 3") {
    p.top_k = 3;
    auto f = frequencies(l, p, 4, n);
    CHECK(f.count(3) == 0);
    near(f[0], 0.4 / 0.9), near(f[1], 0.3 / 0.9), near(f[2], 0.2 / 0.9);
  }
  SUBCASE("top-p 0.8") {
    p.top_p = 0.8f;
    auto f = frequencies(l, p, 5, n);
    CHECK(f.count(3) == 0);
    near(f[0], 0.4 / 0.9), near(f[2], 0.2 / 0.9);
  }
  SUBCASE("min-p 0.6") {
    p.min_p = 0.6f;
    auto f = frequencies(l, p, 6, n);
    CHECK(f.count(2) + f.count(3) == 0);
    near(f[0], 0.4 / 0.7), near(f[1], 0.3 / 0.7);
  }
}
