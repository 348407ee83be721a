// Sampler, streaming detokenizer and stop strings.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "engine/sample/detokenizer.h"
#include "engine/sample/logits_processors.h"
#include "engine/sample/sampler.h"

using namespace llmctl;

namespace {
// One draw at step `step` for a sequence with this prompt (history) and seed.
int pick(const std::vector<float>& l, const SamplingParams& p, const std::vector<int>& history, uint64_t seed,
         uint64_t step) {
  SequenceState st(p, history, seed, 0, {});
  return sample(l.data(), int(l.size()), p, st, step).token;
}
}  // namespace

TEST_CASE("greedy picks the arg max; repetition penalty changes it") {
  std::vector<float> l = {0.1f, 2.0f, 1.9f, -1.0f};
  SamplingParams p;
  p.temperature = 0;
  CHECK(pick(l, p, {}, 1, 0) == 1);
  p.repetition_penalty = 1.2f;
  CHECK(pick(l, p, {1}, 1, 0) == 2);  // 2.0 / 1.2 < 1.9
}

TEST_CASE("greedy: each edit alone moves the arg max; a row nothing edits is read in place") {
  // Token 0 leads; each edit below, alone, makes token 1 the arg max (a greedy draw reads the row
  // without a copy only where edits_logits says nothing edits it).
  const std::vector<float> l = {2.0f, 1.9f, -1.0f, 0.5f};
  auto greedy = [&](SamplingParams p, const std::vector<int>& prompt, const std::vector<int>& eos,
                    const std::vector<int>& generated) {
    p.temperature = 0;
    SequenceState st(p, prompt, 1, 0, eos);
    for (int t : generated) st.append(t, 0.0f);
    const bool edits = edits_logits(p, st);
    return std::pair{sample(l.data(), int(l.size()), p, st, 0).token, edits};
  };
  CHECK(greedy({}, {}, {0}, {}) == std::pair{0, false});
  SamplingParams bias;
  bias.logit_bias = {{1, 1.0f}};
  CHECK(greedy(bias, {}, {}, {}) == std::pair{1, true});
  SamplingParams min_tokens;
  min_tokens.min_tokens = 2;
  CHECK(greedy(min_tokens, {}, {0}, {}) == std::pair{1, true});         // EOS 0 held back
  CHECK(greedy(min_tokens, {}, {0}, {3, 3}) == std::pair{0, false});    // min_tokens reached
  CHECK(greedy(min_tokens, {}, {}, {}) == std::pair{0, false});         // nothing to hold back
  SamplingParams presence;
  presence.presence_penalty = 0.5f;
  CHECK(greedy(presence, {}, {}, {0}) == std::pair{1, true});
  SamplingParams frequency;
  frequency.frequency_penalty = 0.5f;
  CHECK(greedy(frequency, {}, {}, {0}) == std::pair{1, true});
  SamplingParams repetition;
  repetition.repetition_penalty = 1.5f;
  CHECK(greedy(repetition, {0}, {}, {}) == std::pair{1, true});
  const std::vector<float> suppressed = {-INFINITY, -INFINITY};
  SamplingParams p;
  p.temperature = 0;
  SequenceState st(p, {}, 1, 0, {});
  CHECK_THROWS_WITH(sample(suppressed.data(), 2, p, st, 0), doctest::Contains("every token is suppressed"));
}

TEST_CASE("same seed, same draws; sampling frequencies follow the distribution") {
  std::vector<float> l = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  SamplingParams p;
  std::map<int, int> count;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    int t = pick(l, p, {}, 42, i);
    CHECK(pick(l, p, {}, 42, i) == t);
    ++count[t];
  }
  CHECK(count[0] / double(n) == doctest::Approx(0.5).epsilon(0.04));
  CHECK(count[3] / double(n) == doctest::Approx(0.05).epsilon(0.15));
  // top-k 2 keeps only the first two, renormalized (0.625 / 0.375).
  p.top_k = 2;
  count.clear();
  for (int i = 0; i < n; ++i) {
    ++count[pick(l, p, {}, 7, i)];
  }
  CHECK(count[2] + count[3] == 0);
  CHECK(count[0] / double(n) == doctest::Approx(0.625).epsilon(0.04));
  // top-p 0.7 keeps 0.5 + 0.3; min-p 0.5 keeps tokens >= 0.25.
  p.top_k = 0;
  p.top_p = 0.7f;
  count.clear();
  for (int i = 0; i < 2000; ++i) {
    ++count[pick(l, p, {}, 9, i)];
  }
  CHECK(count[2] + count[3] == 0);
  CHECK(count[1] > 0);
  p.top_p = 1.0f;
  p.min_p = 0.5f;
  count.clear();
  for (int i = 0; i < 2000; ++i) {
    ++count[pick(l, p, {}, 9, i)];
  }
  CHECK(count[2] + count[3] == 0);
  CHECK(count[1] > 0);
}

TEST_CASE("counter_uniform is in [0, 1) and differs between seeds") {
  double sum = 0;
  for (int i = 0; i < 10000; ++i) {
    double u = counter_uniform(3, i);
    CHECK(u >= 0.0);
    CHECK(u < 1.0);
    sum += u;
  }
  CHECK(sum / 10000 == doctest::Approx(0.5).epsilon(0.03));
  CHECK(counter_uniform(1, 0) != counter_uniform(2, 0));
}

TEST_CASE("sampling parameters are validated") {
  SamplingParams p;
  p.top_p = 0;
  CHECK_THROWS(p.validate());
  p = {};
  p.temperature = -1;
  CHECK_THROWS(p.validate());
  p = {};
  p.temperature = NAN;
  CHECK_THROWS(p.validate());
  p = {};
  p.max_tokens = 0;
  CHECK_THROWS(p.validate());
}

TEST_CASE("streaming never splits a UTF-8 code point") {
  StreamingText s;
  std::string euro = "\xE2\x82\xAC";  // U+20AC in three pieces
  CHECK(s.push(euro.substr(0, 1)).empty());
  CHECK(s.push(euro.substr(1, 1)).empty());
  CHECK(s.push(euro.substr(2, 1)) == euro);
  CHECK(s.push("a\xF0\x9F") == "a");
  CHECK(s.finish() == "\xEF\xBF\xBD\xEF\xBF\xBD");  // incomplete at the end -> U+FFFD each byte
}

TEST_CASE("stop strings are held back and never emitted, even across tokens") {
  StreamingText s({"END", "\n\n"});
  std::string out;
  for (const char* piece : {"Hello E", "N", "D ignored"}) out += s.push(piece);
  CHECK(s.stopped());
  CHECK(out == "Hello ");
  StreamingText t({"END"});
  out = t.push("an EN");
  CHECK(out == "an ");
  out += t.push("ding");
  out += t.finish();
  CHECK(out == "an ENding");
  CHECK(!t.stopped());
}
