// Incremental detokenizer for streaming: tokens go in as bytes, text comes out only when it is
// complete UTF-8 and can no longer turn into a stop string. A matched stop string and whatever
// follows it are never emitted.
#pragma once
#include <string>
#include <vector>

#include "engine/core/utf8.h"  // utf8_valid

namespace llmctl {

class StreamingText {
 public:
  explicit StreamingText(std::vector<std::string> stop = {}) : stop_(std::move(stop)) {}

  // Appends a token's bytes; returns the text that is now safe to emit (maybe empty).
  std::string push(const std::string& bytes);
  // At the end: everything held back (incomplete UTF-8 is replaced by U+FFFD).
  std::string finish();
  bool stopped() const { return stopped_; }
  const std::string& text() const { return emitted_; }  // all text emitted so far

 private:
  std::vector<std::string> stop_;
  std::string pending_;  // bytes received but not yet emitted
  std::string emitted_;
  bool stopped_ = false;
};

// Length of the longest prefix of s made of complete UTF-8 sequences (invalid bytes count as
// complete so that they are not held back forever).
size_t utf8_complete_prefix(const std::string& s);
// s with invalid UTF-8 sequences replaced by U+FFFD.
std::string utf8_sanitize(const std::string& s);

}  // namespace llmctl
