#include "engine/structured/bounded_strings.h"

#include <charconv>
#include <map>
#include <set>
#include <string_view>
#include <utility>

namespace llmctl {

namespace {

// The converter's rule for one character of a bounded string, as Grammar::ToString prints it.
constexpr std::string_view kCharRuleBody = R"x((([^\"\\\r\n])))x";
// One character JSON allows unescaped in a string: not a control character, quote or backslash,
// and a Unicode scalar value (xgrammar's negated classes also take UTF-8 that encodes surrogates
// or code points past U+10FFFF, which JSON parsers refuse).
constexpr std::string_view kJsonChar = R"x([^\0-\x1f\"\\\uD800-\uDFFF\U00110000-\U001FFFFF])x";
// The minLength copies of the character written over all rules: past it (a schema of many long
// minimums, each its own rule) the grammar is left to xgrammar's own unrolling and its bounds.
constexpr long kMaxCopies = 4096;

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Rule names and the character rules among them, one rule per line ("name ::= body").
void scan_rules(std::string_view text, std::set<std::string, std::less<>>& names, std::set<std::string, std::less<>>& chars) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    const size_t eq = line.find(" ::= ");
    if (eq != std::string_view::npos) {
      const std::string_view name = line.substr(0, eq);
      names.emplace(name);
      if (line.substr(eq + 5) == kCharRuleBody) chars.emplace(name);
    }
    pos = end + 1;
  }
}

// "{lo, hi}" at text[pos]: the bounds and the length of the match (0 if it is not one).
size_t parse_bounds(std::string_view text, size_t pos, long& lo, long& hi) {
  const char* const begin = text.data() + pos;
  const char* const end = text.data() + text.size();
  const char* p = begin;
  if (p == end || *p++ != '{') return 0;
  auto r = std::from_chars(p, end, lo);
  if (r.ec != std::errc() || lo < 0) return 0;
  p = r.ptr;
  if (end - p < 2 || p[0] != ',' || p[1] != ' ') return 0;
  r = std::from_chars(p + 2, end, hi);
  if (r.ec != std::errc() || r.ptr == end || *r.ptr != '}') return 0;
  return size_t(r.ptr + 1 - begin);
}

}  // namespace

std::optional<std::string> budget_bounded_strings(const std::string& ebnf) {
  std::set<std::string, std::less<>> names, chars;
  scan_rules(ebnf, names, chars);
  if (chars.empty()) return std::nullopt;
  std::map<std::pair<long, long>, std::string> budget_rules;  // (lo, hi) -> rule name
  std::string out;
  out.reserve(ebnf.size());
  size_t copied = 0;
  long copies = 0;
  char quote = 0;  // inside a "string" or a [class] (their text may look like a repetition)
  for (size_t i = 0; i < ebnf.size(); ++i) {
    const char c = ebnf[i];
    if (quote) {
      if (c == '\\') ++i;  // (an escaped character)
      else if (c == quote) quote = 0;
      continue;
    }
    if (c == '"') quote = '"';
    if (c == '[') quote = ']';
    if (c != '{' || i == 0 || !name_char(ebnf[i - 1])) continue;
    size_t start = i;
    while (start > 0 && name_char(ebnf[start - 1])) --start;
    const std::string_view name(ebnf.data() + start, i - start);
    if (!chars.count(name)) continue;
    long lo = 0, hi = 0;
    const size_t len = parse_bounds(ebnf, i, lo, hi);
    if (len == 0 || hi < -1 || (hi >= 0 && hi < lo) || hi == 0 || lo > kMaxCopies || hi > 0x7fffffffL) continue;
    std::string& rule = budget_rules[{lo, hi}];
    if (rule.empty()) {
      copies += lo;
      if (copies > kMaxCopies) return std::nullopt;
      rule = "json_string_chars_" + std::to_string(lo) + "_" + (hi < 0 ? std::string("inf") : std::to_string(hi));
      while (names.count(rule)) rule += "_";
      names.insert(rule);
    }
    out.append(ebnf, copied, start - copied);
    out += rule;
    copied = i + len;
    i = copied - 1;
  }
  if (budget_rules.empty()) return std::nullopt;
  out.append(ebnf, copied);
  if (!out.empty() && out.back() != '\n') out += '\n';
  for (const auto& [bounds, rule] : budget_rules) {
    out += rule + (bounds.second < 0 ? std::string() : "[max_chars=" + std::to_string(bounds.second) + "]") + " ::= ";
    for (long k = 0; k < bounds.first; ++k) (out += kJsonChar) += ' ';
    (out += kJsonChar) += "*\n";
  }
  return out;
}

}  // namespace llmctl
