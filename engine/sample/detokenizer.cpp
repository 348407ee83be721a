#include "engine/sample/detokenizer.h"

#include <algorithm>

namespace llmctl {

namespace {
// Length of the UTF-8 sequence starting with lead byte c, 0 if c cannot start one.
int seq_len(unsigned char c) {
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) return 2;
  if (c >= 0xe0 && c <= 0xef) return 3;
  if (c >= 0xf0 && c <= 0xf4) return 4;
  return 0;
}
bool is_cont(unsigned char c) { return (c & 0xc0) == 0x80; }

// Number of bytes of a valid sequence at s[i] (0 = invalid, -1 = valid so far but truncated).
int valid_at(const std::string& s, size_t i) {
  unsigned char c = s[i];
  int n = seq_len(c);
  if (n <= 1) return n;
  for (int k = 1; k < n; ++k) {
    if (i + k >= s.size()) return -1;
    unsigned char d = s[i + k];
    if (!is_cont(d)) return 0;
    if (k == 1) {  // overlong / surrogate / out-of-range checks on the second byte
      if (c == 0xe0 && d < 0xa0) return 0;
      if (c == 0xed && d > 0x9f) return 0;
      if (c == 0xf0 && d < 0x90) return 0;
      if (c == 0xf4 && d > 0x8f) return 0;
    }
  }
  return n;
}
}  // namespace

size_t utf8_complete_prefix(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    int n = valid_at(s, i);
    if (n < 0) break;
    i += n == 0 ? 1 : n;
  }
  return i;
}

std::string utf8_sanitize(const std::string& s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    int n = valid_at(s, i);
    if (n <= 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

std::string StreamingText::push(const std::string& bytes) {
  if (stopped_) return {};
  pending_ += bytes;
  // A stop string anywhere in the pending text ends the stream just before it.
  size_t cut = std::string::npos;
  for (const auto& s : stop_) {
    size_t at = pending_.find(s);
    if (at != std::string::npos) cut = std::min(cut, at);
  }
  if (cut != std::string::npos) {
    std::string out = utf8_sanitize(pending_.substr(0, cut));
    emitted_ += out;
    pending_.clear();
    stopped_ = true;
    return out;
  }
  size_t safe = utf8_complete_prefix(pending_);
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const auto& s : stop_)
    for (size_t k = std::min(s.size() - 1, pending_.size()); k > hold; --k)
      if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
  safe = std::min(safe, pending_.size() - hold);
  std::string out = utf8_sanitize(pending_.substr(0, safe));
  pending_.erase(0, safe);
  emitted_ += out;
  return out;
}

std::string StreamingText::finish() {
  if (stopped_) return {};
  std::string out = utf8_sanitize(pending_);
  pending_.clear();
  emitted_ += out;
  return out;
}

}  // namespace llmctl
