// A compiled PCRE2 pattern (UTF + Unicode properties, JIT when available) for pre-tokenizer
// splits. Patterns are written as HF tokenizers (Oniguruma) reads them; the few places where
// PCRE2 differs are adjusted at compile time (see regex.cpp).
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace llmctl {

class Regex {
 public:
  // Throws InputError with the PCRE2 message and offset. literal: match `pattern` as plain text.
  explicit Regex(const std::string& pattern, bool literal = false);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  const std::string& pattern() const { return pattern_; }
  bool literal() const { return literal_; }
  // Non-empty, non-overlapping matches [begin, end) left to right. Invalid UTF-8 is allowed in
  // `text`: it never matches (so it falls into the gaps between matches).
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;

 private:
  std::string pattern_;
  bool literal_;
  void* code_ = nullptr;  // pcre2_code_8*
};

}  // namespace llmctl
