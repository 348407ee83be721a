#include "engine/tokenizer/jinja/unicode.h"

#include <locale>

namespace llmctl::jinja {

std::u32string utf8_decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
    bool ok = n >= 0 && i + n < s.size();
    char32_t cp = ok ? (n == 0 ? c : c & (0x3F >> n)) : 0;
    for (int k = 1; ok && k <= n; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) ok = false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (!ok) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += n + 1;
  }
  return out;
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string utf8_encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) utf8_append(out, c);
  return out;
}

bool py_isspace(char32_t c) {
  return (c >= 9 && c <= 13) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

// Approximates unicodedata: control, format, separator (other than ' '), surrogate and private
// use code points are not printable; repr() escapes them.
bool py_isprintable(char32_t c) {
  if (c < 0x20 || c == 0x7F || (c >= 0x80 && c <= 0xA0) || c == 0xAD) return false;
  if (c == 0x61C || c == 0x180E || c == 0x1680 || (c >= 0x2000 && c <= 0x200F)) return false;
  if ((c >= 0x2028 && c <= 0x202F) || (c >= 0x205F && c <= 0x206F) || c == 0x3000) return false;
  if ((c >= 0xD800 && c <= 0xF8FF) || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB)) return false;
  if (c >= 0xF0000 || c > 0x10FFFF) return false;
  return true;
}

namespace {
// The C.UTF-8 locale carries the Unicode simple case mappings; fall back to ASCII without it.
const std::ctype<wchar_t>* unicode_ctype() {
  static const std::ctype<wchar_t>* facet = []() -> const std::ctype<wchar_t>* {
    for (const char* name : {"C.UTF-8", "C.utf8", "en_US.UTF-8"}) {
      try {
        static std::locale loc(name);
        return &std::use_facet<std::ctype<wchar_t>>(loc);
      } catch (const std::exception&) {
      }
    }
    return nullptr;
  }();
  return facet;
}
}  // namespace

char32_t to_upper(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  auto* f = unicode_ctype();
  return f ? static_cast<char32_t>(f->toupper(static_cast<wchar_t>(c))) : c;
}

char32_t to_lower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  auto* f = unicode_ctype();
  return f ? static_cast<char32_t>(f->tolower(static_cast<wchar_t>(c))) : c;
}

bool is_cased(char32_t c) { return to_upper(c) != c || to_lower(c) != c; }

std::string py_upper(std::string_view s) {
  std::string out;
  for (char32_t c : utf8_decode(s)) {
    if (c == 0xDF) {  // ß -> SS, the one full case mapping templates are likely to meet
      out += "SS";
      continue;
    }
    utf8_append(out, to_upper(c));
  }
  return out;
}

std::string py_lower(std::string_view s) {
  std::string out;
  for (char32_t c : utf8_decode(s)) utf8_append(out, to_lower(c));
  return out;
}

std::string py_capitalize(std::string_view s) {
  std::u32string u = utf8_decode(s);
  for (size_t i = 0; i < u.size(); ++i) u[i] = i == 0 ? to_upper(u[i]) : to_lower(u[i]);
  return utf8_encode(u);
}

std::string py_title(std::string_view s) {
  std::u32string u = utf8_decode(s);
  bool prev_cased = false;
  for (char32_t& c : u) {
    c = prev_cased ? to_lower(c) : to_upper(c);
    prev_cased = is_cased(c);
  }
  return utf8_encode(u);
}

std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right) {
  std::u32string u = utf8_decode(s);
  std::u32string set = chars ? utf8_decode(*chars) : std::u32string();
  auto strip_it = [&](char32_t c) {
    return chars ? set.find(c) != std::u32string::npos : py_isspace(c);
  };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && strip_it(u[b])) ++b;
  if (right)
    while (e > b && strip_it(u[e - 1])) --e;
  return utf8_encode(std::u32string_view(u).substr(b, e - b));
}

std::vector<std::string> py_split(std::string_view s, const std::string* sep, int64_t maxsplit,
                                  bool from_right) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) throw std::invalid_argument("empty separator");
    if (!from_right) {
      size_t pos = 0;
      while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
        size_t p = s.find(*sep, pos);
        if (p == std::string_view::npos) break;
        out.emplace_back(s.substr(pos, p - pos));
        pos = p + sep->size();
      }
      out.emplace_back(s.substr(pos));
    } else {
      size_t end = s.size();
      std::vector<std::string> rev;
      while (maxsplit < 0 || static_cast<int64_t>(rev.size()) < maxsplit) {
        if (end < sep->size()) break;
        size_t p = s.rfind(*sep, end - sep->size());
        if (p == std::string_view::npos) break;
        rev.emplace_back(s.substr(p + sep->size(), end - p - sep->size()));
        end = p;
      }
      rev.emplace_back(s.substr(0, end));
      out.assign(rev.rbegin(), rev.rend());
    }
    return out;
  }
  // Whitespace runs; leading and trailing whitespace never produce empty parts.
  std::u32string u = utf8_decode(s);
  if (!from_right) {
    size_t i = 0;
    while (true) {
      while (i < u.size() && py_isspace(u[i])) ++i;
      if (i >= u.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
        size_t e = u.size();
        while (e > i && py_isspace(u[e - 1])) --e;
        out.push_back(utf8_encode(std::u32string_view(u).substr(i, e - i)));
        break;
      }
      size_t j = i;
      while (j < u.size() && !py_isspace(u[j])) ++j;
      out.push_back(utf8_encode(std::u32string_view(u).substr(i, j - i)));
      i = j;
    }
  } else {
    size_t e = u.size();
    std::vector<std::string> rev;
    while (true) {
      while (e > 0 && py_isspace(u[e - 1])) --e;
      if (e == 0) break;
      if (maxsplit >= 0 && static_cast<int64_t>(rev.size()) >= maxsplit) {
        size_t b = 0;
        while (b < e && py_isspace(u[b])) ++b;
        rev.push_back(utf8_encode(std::u32string_view(u).substr(b, e - b)));
        break;
      }
      size_t b = e;
      while (b > 0 && !py_isspace(u[b - 1])) --b;
      rev.push_back(utf8_encode(std::u32string_view(u).substr(b, e - b)));
      e = b;
    }
    out.assign(rev.rbegin(), rev.rend());
  }
  return out;
}

std::vector<std::string> py_splitlines(std::string_view s) {
  std::u32string u = utf8_decode(s);
  std::vector<std::string> out;
  size_t start = 0, i = 0;
  auto is_break = [](char32_t c) {
    return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) ||
           c == 0x85 || c == 0x2028 || c == 0x2029;
  };
  while (i < u.size()) {
    if (is_break(u[i])) {
      out.push_back(utf8_encode(std::u32string_view(u).substr(start, i - start)));
      if (u[i] == '\r' && i + 1 < u.size() && u[i + 1] == '\n') ++i;
      start = ++i;
    } else {
      ++i;
    }
  }
  if (start < u.size()) out.push_back(utf8_encode(std::u32string_view(u).substr(start)));
  return out;
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view repl,
                       int64_t count) {
  std::string out;
  if (old.empty()) {  // Python inserts `repl` between characters and at both ends
    std::u32string u = utf8_decode(s);
    int64_t n = 0;
    for (size_t i = 0; i <= u.size(); ++i) {
      if (count < 0 || n < count) {
        out += repl;
        ++n;
      }
      if (i < u.size()) utf8_append(out, u[i]);
    }
    return out;
  }
  size_t pos = 0;
  int64_t n = 0;
  while (count < 0 || n < count) {
    size_t p = s.find(old, pos);
    if (p == std::string_view::npos) break;
    out.append(s.substr(pos, p - pos));
    out.append(repl);
    pos = p + old.size();
    ++n;
  }
  out.append(s.substr(pos));
  return out;
}

int64_t py_count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(utf8_decode(s).size()) + 1;
  int64_t n = 0;
  for (size_t p = s.find(sub); p != std::string_view::npos; p = s.find(sub, p + sub.size())) ++n;
  return n;
}

int64_t py_find(std::string_view s, std::string_view sub, bool from_right) {
  size_t p = from_right ? s.rfind(sub) : s.find(sub);
  if (p == std::string_view::npos) return -1;
  return static_cast<int64_t>(utf8_decode(s.substr(0, p)).size());
}

}  // namespace llmctl::jinja
