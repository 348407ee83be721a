// GrammarCompiler: ConstraintSpec -> CompiledConstraint, with xgrammar's C++ core, for one model's
// vocabulary. Thread-safe: the server's request threads compile (never the engine loop).
//
// Bounded, because every spec arrives with a request: the text's size, the schema's JSON nesting,
// the choices; compilation runs on a thread of its own and a request waits at most
// CompileLimits::timeout (the compile that overran is left to finish: while max_overrunning of them
// still run, new compiles are refused). Compiled constraints are cached by their spec (LRU within
// cache_bytes), so a schema sent again costs nothing, and requests for a spec being compiled wait
// for that compile instead of starting their own.
// Every failure is an InputError naming the field (a 400 at the HTTP boundary).
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "engine/structured/constraint.h"
#include "engine/tokenizer/tokenizer.h"

namespace llmctl {

struct CompileLimits {
  size_t max_text_bytes = 256 * 1024;    // a schema, regex or grammar
  int max_json_depth = 64;               // nesting of a JSON schema
  size_t max_object_keys = 4096;         // keys of one object in a JSON schema
  size_t max_choices = 1024;
  std::chrono::milliseconds timeout{10000};
  int max_overrunning = 2;               // compiles past their timeout still running
  size_t cache_bytes = size_t(256) << 20;
  int threads = 2;                       // xgrammar's threads per compile (it splits the vocabulary)
};

struct GrammarCompilerStats {
  int64_t compiles = 0, cache_hits = 0, failures = 0, timeouts = 0;
  double last_compile_ms = 0;
};

class GrammarCompiler {
 public:
  // vocab: the logits rows' width (ids past the tokenizer's vocabulary are never allowed).
  GrammarCompiler(const Tokenizer& tok, int vocab, std::span<const int> eos_ids, CompileLimits limits = {});
  ~GrammarCompiler();
  GrammarCompiler(const GrammarCompiler&) = delete;
  GrammarCompiler& operator=(const GrammarCompiler&) = delete;

  // Throws InputError (bad or unsupported spec, too large, too slow).
  std::shared_ptr<const CompiledConstraint> compile(const ConstraintSpec& spec);
  GrammarCompilerStats stats() const;
  int vocab() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;  // shared with compiles that overran their timeout
};

// The EBNF grammar whose language is exactly `choices` (strings escaped for xgrammar's EBNF).
std::string choice_grammar(std::span<const std::string> choices);

}  // namespace llmctl
