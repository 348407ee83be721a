// NgramProposer (prompt lookup) on hand-made token sequences and against a naive search on random ones.
#include <doctest/doctest.h>

#include <random>
#include <vector>

#include "engine/core/error.h"
#include "engine/spec/ngram_proposer.h"

using namespace llmctl;

namespace {
std::vector<int32_t> propose(const NgramProposer& p, std::vector<int32_t> tokens, int k) { return p.propose(tokens, k); }

// The definition, spelled out: for n = max..min, the latest start i < N - n with tokens[i, i + n)
// equal to the last n tokens; drafts continue the sequence tokens + drafts from i + n.
std::vector<int32_t> naive(const std::vector<int32_t>& t, int min_n, int max_n, int k) {
  const int N = int(t.size());
  for (int n = max_n; n >= min_n; --n) {
    if (n >= N) continue;
    for (int i = N - n - 1; i >= 0; --i) {
      bool eq = true;
      for (int j = 0; j < n; ++j) eq = eq && t[size_t(i + j)] == t[size_t(N - n + j)];
      if (!eq) continue;
      std::vector<int32_t> ext = t;
      for (int s = 0; s < k; ++s) ext.push_back(ext[size_t(i + n + s)]);
      return std::vector<int32_t>(ext.begin() + N, ext.end());
    }
  }
  return {};
}
}  // namespace

TEST_CASE("ngram proposer: proposes what followed the last n-gram's most recent earlier occurrence") {
  NgramProposer p(1, 3);
  // "... 1 2 3 | 7 8 9 ... 1 2 3" -> 7 8 9 (the 3-gram 1 2 3 occurred at the start)
  CHECK(propose(p, {1, 2, 3, 7, 8, 9, 5, 6, 1, 2, 3}, 3) == std::vector<int32_t>{7, 8, 9});
  CHECK(propose(p, {1, 2, 3, 7, 8, 9, 5, 6, 1, 2, 3}, 2) == std::vector<int32_t>{7, 8});
  // The most recent occurrence wins: 1 2 3 is followed by 7 first, later by 4.
  CHECK(propose(p, {1, 2, 3, 7, 1, 2, 3, 4, 5, 1, 2, 3}, 2) == std::vector<int32_t>{4, 5});
  // A longer n-gram beats a more recent shorter one: "2 3" last occurred before 9, "1 2 3" before 7.
  CHECK(propose(p, {1, 2, 3, 7, 5, 2, 3, 9, 1, 2, 3}, 1) == std::vector<int32_t>{7});
  // Falls back to shorter n-grams: only the 1-gram "3" occurred before (followed by 4).
  CHECK(propose(p, {3, 4, 5, 6, 3}, 2) == std::vector<int32_t>{4, 5});
  // No earlier occurrence of even the last token: nothing.
  CHECK(propose(p, {1, 2, 3, 4}, 4).empty());
  CHECK(propose(p, {5}, 4).empty());
  CHECK(propose(p, {}, 4).empty());
  CHECK(propose(p, {1, 2, 1}, 0).empty());
}

TEST_CASE("ngram proposer: a repeat shorter than the drafts continues by copying itself") {
  NgramProposer p(1, 4);
  // Period 2: the latest earlier "a b" ... continues a b a b.
  CHECK(propose(p, {10, 11, 10, 11, 10, 11}, 5) == std::vector<int32_t>{10, 11, 10, 11, 10});
  // A run of one token.
  CHECK(propose(p, {4, 4}, 3) == std::vector<int32_t>{4, 4, 4});
  // Near the end: the occurrence is followed by two known tokens, then by the drafts themselves.
  CHECK(propose(p, {9, 1, 2, 3, 1, 2}, 4) == std::vector<int32_t>{3, 1, 2, 3});
}

TEST_CASE("ngram proposer: min_n bounds the match; bad sizes are refused") {
  NgramProposer p(2, 3);
  CHECK(propose(p, {3, 4, 5, 6, 3}, 2).empty());  // only a 1-gram matches
  CHECK(propose(p, {3, 4, 5, 3, 4}, 2) == std::vector<int32_t>{5, 3});
  CHECK(p.name() == "ngram[2..3]");
  CHECK_THROWS_AS(NgramProposer(0, 2), InputError);
  CHECK_THROWS_AS(NgramProposer(3, 2), InputError);
}

TEST_CASE("ngram proposer: equals the naive definition on random sequences over small alphabets") {
  std::mt19937 rng(7);
  int proposed = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const int alphabet = 2 + int(rng() % 6), len = int(rng() % 40), k = int(rng() % 6);
    const int min_n = 1 + int(rng() % 3), max_n = min_n + int(rng() % 3);
    std::vector<int32_t> t(static_cast<size_t>(len));
    for (auto& x : t) x = int32_t(rng() % uint32_t(alphabet));
    const std::vector<int32_t> got = NgramProposer(min_n, max_n).propose(t, k);
    INFO("trial " << trial);
    REQUIRE(got == naive(t, min_n, max_n, k));
    proposed += !got.empty();
  }
  CHECK(proposed > 500);  // the comparison covered real proposals, not only empty ones
}
