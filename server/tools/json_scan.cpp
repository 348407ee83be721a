#include "server/tools/json_scan.h"

#include <nlohmann/json.hpp>

namespace llmctl::server {

namespace {
bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t skip_ws(std::string_view s, size_t i) {
  while (i < s.size() && is_ws(s[i])) ++i;
  return i;
}

// s[i] == '"': one past the closing quote, or npos when the string is not closed yet.
size_t string_end(std::string_view s, size_t i) {
  for (++i; i < s.size(); ++i) {
    if (s[i] == '\\') ++i;
    else if (s[i] == '"') return i + 1;
  }
  return std::string_view::npos;
}
}  // namespace

std::optional<size_t> json_value_end(std::string_view s, bool* bad) {
  if (bad) *bad = false;
  if (s.empty()) return std::nullopt;
  const char c0 = s[0];
  if (c0 == '"') {
    const size_t e = string_end(s, 0);
    return e == std::string_view::npos ? std::nullopt : std::optional<size_t>(e);
  }
  if (c0 != '{' && c0 != '[') {  // a number, true, false or null: up to a delimiter
    if (!(c0 == '-' || (c0 >= '0' && c0 <= '9') || c0 == 't' || c0 == 'f' || c0 == 'n')) {
      if (bad) *bad = true;
      return std::nullopt;
    }
    size_t i = 0;
    while (i < s.size() && s[i] != ',' && s[i] != '}' && s[i] != ']' && !is_ws(s[i])) ++i;
    return i < s.size() ? std::optional<size_t>(i) : std::nullopt;
  }
  size_t depth = 0;
  for (size_t i = 0; i < s.size();) {
    const char c = s[i];
    if (c == '"') {
      i = string_end(s, i);
      if (i == std::string_view::npos) return std::nullopt;
      continue;
    }
    if (c == '{' || c == '[') ++depth;
    if ((c == '}' || c == ']') && --depth == 0) return i + 1;
    ++i;
  }
  return std::nullopt;
}

std::optional<std::string> decode_json_string(std::string_view raw) {
  if (raw.size() < 2 || raw.front() != '"') return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(raw, nullptr, false);
  if (!j.is_string()) return std::nullopt;
  return j.get<std::string>();
}

const JsonMemberScan* JsonObjectScan::find(std::string_view key) const {
  for (const auto& m : members)
    if (m.key == key) return &m;
  return nullptr;
}

JsonObjectScan scan_json_object(std::string_view s) {
  JsonObjectScan out;
  if (s.empty() || s[0] != '{') {
    out.valid = false;
    return out;
  }
  size_t i = 1;
  for (;;) {
    i = skip_ws(s, i);
    if (i >= s.size()) return out;
    if (s[i] == '}' && out.members.empty()) {
      out.complete = true;
      out.end = i + 1;
      return out;
    }
    if (s[i] != '"') {
      out.valid = false;
      return out;
    }
    const size_t key_end = string_end(s, i);
    if (key_end == std::string_view::npos) return out;  // the key is still being written
    auto key = decode_json_string(s.substr(i, key_end - i));
    if (!key) {
      out.valid = false;
      return out;
    }
    i = skip_ws(s, key_end);
    if (i >= s.size()) return out;
    if (s[i] != ':') {
      out.valid = false;
      return out;
    }
    i = skip_ws(s, i + 1);
    JsonMemberScan m;
    m.key = std::move(*key);
    if (i >= s.size()) {
      out.members.push_back(std::move(m));
      return out;
    }
    bool bad = false;
    const auto end = json_value_end(s.substr(i), &bad);
    if (bad) {
      out.valid = false;
      return out;
    }
    if (!end) {
      m.raw = s.substr(i);
      out.members.push_back(std::move(m));
      return out;
    }
    m.raw = s.substr(i, *end);
    m.complete = true;
    out.members.push_back(std::move(m));
    i = skip_ws(s, i + *end);
    if (i >= s.size()) return out;
    if (s[i] == ',') {
      ++i;
      continue;
    }
    if (s[i] == '}') {
      out.complete = true;
      out.end = i + 1;
      return out;
    }
    out.valid = false;
    return out;
  }
}

}  // namespace llmctl::server
