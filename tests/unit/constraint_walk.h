// Walking a compiled constraint over the byte tokenizer (byte_tokenizer.h): the allowed ids are
// the characters a grammar allows next. Shared by the structured-output and tool-call tests.
#pragma once
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "byte_tokenizer.h"
#include "engine/structured/grammar_compiler.h"

namespace llmctl::test {

constexpr int kEos = ByteTokenizer::kImEnd;

inline GrammarCompiler& compiler() {
  static ByteTokenizer tok;
  static const std::vector<int> eos{kEos};
  static GrammarCompiler c(tok, ByteTokenizer::kVocab, eos);
  return c;
}

inline std::vector<int> allowed_ids(ConstraintMatcher& m) {
  std::vector<uint32_t> words(m.mask_words());
  m.fill_mask(words);
  std::vector<int> ids;
  for (int id = 0; id < int(words.size()) * 32; ++id)
    if (words[size_t(id) / 32] >> (id % 32) & 1u) ids.push_back(id);
  return ids;
}

// A random walk through the grammar: each step draws uniformly among the allowed tokens, until
// EOS (or max_steps). Returns the text; ended tells whether EOS came.
inline std::string random_walk(const CompiledConstraint& c, uint64_t seed, bool& ended, int max_steps = 400) {
  std::mt19937_64 rng(seed);
  const std::vector<int> stops{kEos};
  auto m = c.matcher(stops);
  std::string text;
  ended = false;
  for (int step = 0; step < max_steps; ++step) {
    const std::vector<int> ids = allowed_ids(*m);
    REQUIRE_FALSE(ids.empty());
    const int t = ids[rng() % ids.size()];
    REQUIRE(m->accept(t));
    if (t == kEos) {
      ended = true;
      CHECK(m->terminated());
      return text;
    }
    REQUIRE(t < 256);
    text += char(t);
  }
  return text;
}

}  // namespace llmctl::test
