#define PCRE2_CODE_UNIT_WIDTH 8
#include "engine/tokenizer/regex.h"

#include <pcre2.h>

#include "engine/core/error.h"

namespace llmctl {
namespace {

// Oniguruma's \s (what HF tokenizers uses) is Unicode White_Space, which includes U+0085 (NEL);
// PCRE2's \s under UCP does not. Rewrite \s and \S so both engines split the same way.
std::string adjust_pattern(const std::string& p) {
  std::string out;
  out.reserve(p.size() + 16);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char e = p[++i];
      if (e == 's') {
        out += in_class ? "\\s\\x{85}" : "[\\s\\x{85}]";
      } else if (e == 'S' && !in_class) {
        out += "[^\\s\\x{85}]";
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

pcre2_code* as_code(void* p) { return static_cast<pcre2_code*>(p); }

}  // namespace

Regex::Regex(const std::string& pattern, bool literal) : pattern_(pattern), literal_(literal) {
  std::string src = literal ? pattern : adjust_pattern(pattern);
  uint32_t opts = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF;
  opts |= literal ? PCRE2_LITERAL : PCRE2_UCP;  // UCP is not allowed with LITERAL (nor needed)
  int err = 0;
  PCRE2_SIZE err_off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(src.data()), src.size(), opts, &err,
                                   &err_off, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    LLM_THROW() << "bad pre-tokenizer regex '" << pattern << "' at offset " << err_off << ": "
                << reinterpret_cast<const char*>(msg);
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter when unavailable
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(as_code(code_)); }

void Regex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  pcre2_code* code = as_code(code_);
  std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> md(
      pcre2_match_data_create_from_pattern(code, nullptr), pcre2_match_data_free);
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    int rc = pcre2_match(code, subject, text.size(), pos, 0, md.get(), nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)  // very long runs: the interpreter uses the heap
      rc = pcre2_match(code, subject, text.size(), pos, PCRE2_NO_JIT, md.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      LLM_THROW() << "regex '" << pattern_ << "' failed at byte " << pos << ": "
                  << reinterpret_cast<const char*>(msg);
    }
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    size_t b = ov[0], e = ov[1];
    if (e > b) {
      out.emplace_back(b, e);
      pos = e;
    } else {  // empty match: step over one character (or one invalid byte)
      pos = b + 1;
      while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xc0) == 0x80) ++pos;
    }
  }
}

}  // namespace llmctl
