#include "engine/core/json_raw.h"

#include <string>

namespace llmctl {

namespace {

struct Cursor {
  std::string_view s;
  size_t i = 0;

  void skip_ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  }
  // s[i] is '"': past the closing quote. Returns false on a truncated string.
  bool skip_string() {
    for (++i; i < s.size(); ++i) {
      if (s[i] == '\\') {
        ++i;
      } else if (s[i] == '"') {
        ++i;
        return true;
      }
    }
    return false;
  }
  // The decoded key at s[i] == '"' (escapes resolved for the simple cases a key of ours uses;
  // a key with other escapes never equals one of ours, and is compared as written).
  std::string read_key() {
    const size_t begin = i + 1;
    if (!skip_string()) return {};
    return std::string(s.substr(begin, i - 1 - begin));
  }
  // Past one value (iteratively: nesting depth costs no stack). Returns false on malformed input.
  bool skip_value() {
    skip_ws();
    if (i >= s.size()) return false;
    if (s[i] == '"') return skip_string();
    if (s[i] != '{' && s[i] != '[') {
      while (i < s.size() && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' && s[i] != '\n' &&
             s[i] != '\t' && s[i] != '\r')
        ++i;
      return true;
    }
    size_t depth = 0;
    while (i < s.size()) {
      const char c = s[i];
      if (c == '"') {
        if (!skip_string()) return false;
        continue;
      }
      if (c == '{' || c == '[') ++depth;
      if (c == '}' || c == ']') {
        if (--depth == 0) {
          ++i;
          return true;
        }
      }
      ++i;
    }
    return false;
  }
};

}  // namespace

std::optional<std::string_view> raw_json_member(std::string_view doc, std::initializer_list<std::string_view> path) {
  Cursor c{doc};
  for (std::string_view key : path) {
    c.skip_ws();
    if (c.i >= doc.size() || doc[c.i] != '{') return std::nullopt;
    ++c.i;
    std::optional<size_t> value;  // where the last member named `key` starts (as a parser keeps the last)
    for (;;) {
      c.skip_ws();
      if (c.i >= doc.size()) return std::nullopt;
      if (doc[c.i] == '}') break;
      if (doc[c.i] == ',') {
        ++c.i;
        continue;
      }
      if (doc[c.i] != '"') return std::nullopt;
      const std::string k = c.read_key();
      c.skip_ws();
      if (c.i >= doc.size() || doc[c.i] != ':') return std::nullopt;
      ++c.i;
      c.skip_ws();
      if (k == key) value = c.i;
      if (!c.skip_value()) return std::nullopt;
    }
    if (!value) return std::nullopt;
    c.i = *value;
  }
  c.skip_ws();
  const size_t begin = c.i;
  if (!c.skip_value()) return std::nullopt;
  return doc.substr(begin, c.i - begin);
}

}  // namespace llmctl
