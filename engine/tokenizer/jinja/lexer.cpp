#include "engine/tokenizer/jinja/lexer.h"

#include <cstdlib>

#include "engine/core/error.h"
#include "engine/tokenizer/jinja/unicode.h"

namespace llmctl::jinja {

void syntax_error(int line, const std::string& msg) {
  LLM_THROW() << "chat template syntax error (line " << line << "): " << msg;
}

namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// Python's str.rstrip() (Unicode whitespace).
std::string rstrip_py(const std::string& s) { return py_strip(s, nullptr, false, true); }

bool all_py_space(std::string_view s) {
  if (s.empty()) return false;  // jinja2 matches \s+, so an empty tail strips nothing
  for (char32_t c : utf8_decode(s))
    if (!py_isspace(c)) return false;
  return true;
}

int count_newlines(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Python's unicode-escape decoding, which jinja2 applies to string literals.
std::string unescape(std::string_view s, int line) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 >= s.size()) {
      out += s[i];
      continue;
    }
    char c = s[++i];
    auto hex = [&](int n) {
      if (i + n >= s.size()) syntax_error(line, "truncated escape in string");
      std::string h(s.substr(i + 1, n));
      for (char d : h)
        if (!isxdigit(static_cast<unsigned char>(d))) syntax_error(line, "invalid escape in string");
      i += n;
      utf8_append(out, static_cast<char32_t>(std::strtoul(h.c_str(), nullptr, 16)));
    };
    switch (c) {
      case '\n': break;  // line continuation
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      case '"': out += '"'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case 'x': hex(2); break;
      case 'u': hex(4); break;
      case 'U': hex(8); break;
      case 'N': syntax_error(line, "\\N{...} escapes are not supported");
      default:
        if (c >= '0' && c <= '7') {
          int v = c - '0', n = 1;
          while (n < 3 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7') {
            v = v * 8 + (s[++i] - '0');
            ++n;
          }
          utf8_append(out, static_cast<char32_t>(v));
        } else {
          out += '\\';  // unknown escapes keep their backslash
          out += c;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  Lexer(std::string src, const LexOptions& opt) : s_(std::move(src)), opt_(opt) {}

  std::vector<Token> run() {
    while (pos_ < s_.size()) {
      size_t p = find_tag(pos_);
      if (p == std::string::npos) {
        push(Tok::Data, s_.substr(pos_));
        line_ += count_newlines(std::string_view(s_).substr(pos_));
        break;
      }
      char kind = s_[p + 1];
      size_t q = p + 2;
      char sign = 0;
      if (q < s_.size() && (s_[q] == '-' || s_[q] == '+')) sign = s_[q++];
      size_t raw_end = kind == '%' ? match_raw(q) : std::string::npos;
      emit_text(s_.substr(pos_, p - pos_), sign, kind != '{');
      pos_ = q;
      if (raw_end != std::string::npos) {
        pos_ = raw_end;
        line_starting_ = s_[pos_ - 1] == '\n';
        lex_raw();
      } else if (kind == '#') {
        lex_comment();
      } else {
        lex_tag(kind == '{');
      }
    }
    push(Tok::Eof, "");
    return std::move(out_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t p = s_.find('{', from); p != std::string::npos; p = s_.find('{', p + 1))
      if (p + 1 < s_.size() && (s_[p + 1] == '{' || s_[p + 1] == '%' || s_[p + 1] == '#')) return p;
    return std::string::npos;
  }

  void push(Tok t, std::string text) { out_.push_back(Token{t, std::move(text), line_, 0, 0}); }

  // Text before a tag: '-' strips all whitespace; otherwise lstrip_blocks strips spaces between
  // a line start and a block or comment tag.
  void emit_text(std::string text, char sign, bool block_like) {
    int lines = count_newlines(text);
    if (sign == '-') {
      text = rstrip_py(text);
    } else if (sign != '+' && opt_.lstrip_blocks && block_like) {
      size_t nl = text.rfind('\n');
      size_t l = nl == std::string::npos ? 0 : nl + 1;
      if ((l > 0 || line_starting_) && all_py_space(std::string_view(text).substr(l))) text.resize(l);
    }
    if (!text.empty()) push(Tok::Data, text);
    line_ += lines;
    line_starting_ = false;
  }

  size_t skip_ws(size_t p) const {
    while (p < s_.size() && is_ws(s_[p])) ++p;
    return p;
  }

  bool at(size_t p, std::string_view lit) const { return s_.compare(p, lit.size(), lit) == 0; }

  // `{%[-+]? raw [-]?%}`: returns the position after the tag, npos when not a raw tag.
  size_t match_raw(size_t q) const {
    size_t p = skip_ws(q);
    if (!at(p, "raw")) return std::string::npos;
    p = skip_ws(p + 3);
    if (at(p, "-%}")) return skip_ws(p + 3);
    if (at(p, "%}")) return p + 2;
    return std::string::npos;
  }

  // Consumes a tag end at pos_ ("-" strips following whitespace, trim_blocks one newline).
  void finish_end(size_t after, char sign, bool trim) {
    if (sign == '-') after = skip_ws(after);
    else if (sign != '+' && trim && after < s_.size() && s_[after] == '\n') ++after;
    line_ += count_newlines(std::string_view(s_).substr(pos_, after - pos_));
    pos_ = after;
    line_starting_ = s_[pos_ - 1] == '\n';
  }

  void lex_raw() {
    for (size_t p = find_tag(pos_); p != std::string::npos; p = find_tag(p + 1)) {
      if (s_[p + 1] != '%') continue;
      size_t q = p + 2;
      char sign = 0;
      if (q < s_.size() && (s_[q] == '-' || s_[q] == '+')) sign = s_[q++];
      size_t r = skip_ws(q);
      if (!at(r, "endraw")) continue;
      r = skip_ws(r + 6);
      char end_sign = 0;
      if (r < s_.size() && (s_[r] == '-' || s_[r] == '+')) end_sign = s_[r++];
      if (!at(r, "%}")) continue;
      emit_text(s_.substr(pos_, p - pos_), sign, true);
      pos_ = p;
      finish_end(r + 2, end_sign, opt_.trim_blocks);
      return;
    }
    syntax_error(line_, "Missing end of raw directive");
  }

  void lex_comment() {
    size_t e = s_.find("#}", pos_);
    if (e == std::string::npos) syntax_error(line_, "Missing end of comment tag");
    char sign = e > pos_ && (s_[e - 1] == '-' || s_[e - 1] == '+') ? s_[e - 1] : 0;
    finish_end(e + 2, sign, opt_.trim_blocks);
  }

  void lex_tag(bool var) {
    push(var ? Tok::VarBegin : Tok::BlockBegin, "");
    std::vector<char> stack;  // open brackets: end tags only count when balanced
    while (true) {
      if (pos_ >= s_.size())
        syntax_error(line_, var ? "unexpected end of template, expected end of print statement"
                                : "unexpected end of template, expected end of block");
      if (stack.empty()) {
        const char* close = var ? "}}" : "%}";
        for (char sign : {'-', '+', '\0'}) {
          if (var && sign == '+') continue;
          size_t p = pos_ + (sign ? 1 : 0);
          if ((sign && s_[pos_] != sign) || !at(p, close)) continue;
          push(var ? Tok::VarEnd : Tok::BlockEnd, "");
          finish_end(p + 2, sign, !var && opt_.trim_blocks);
          return;
        }
      }
      char c = s_[pos_];
      if (is_ws(c)) {
        size_t p = skip_ws(pos_);
        line_ += count_newlines(std::string_view(s_).substr(pos_, p - pos_));
        pos_ = p;
      } else if (is_digit(c)) {
        lex_number();
      } else if (is_name_start(c)) {
        size_t p = pos_;
        while (p < s_.size() && is_name_char(s_[p])) ++p;
        push(Tok::Name, s_.substr(pos_, p - pos_));
        pos_ = p;
      } else if (c == '\'' || c == '"') {
        lex_string(c);
      } else {
        lex_operator(stack);
      }
    }
  }

  size_t digits(size_t p) const {  // \d+(_\d+)*
    while (p < s_.size() && (is_digit(s_[p]) || (s_[p] == '_' && p + 1 < s_.size() && is_digit(s_[p + 1]))))
      ++p;
    return p;
  }

  void lex_number() {
    size_t p = digits(pos_);
    bool is_float = false;
    bool after_dot = pos_ > 0 && s_[pos_ - 1] == '.';  // `x.0.1` is two subscripts
    if (!after_dot && p + 1 < s_.size() && s_[p] == '.' && is_digit(s_[p + 1])) {
      p = digits(p + 1);
      is_float = true;
    }
    if (!after_dot && p < s_.size() && (s_[p] == 'e' || s_[p] == 'E')) {
      size_t e = p + 1;
      if (e < s_.size() && (s_[e] == '+' || s_[e] == '-')) ++e;
      if (e < s_.size() && is_digit(s_[e])) {
        p = digits(e);
        is_float = true;
      }
    }
    std::string text;
    for (size_t k = pos_; k < p; ++k)
      if (s_[k] != '_') text += s_[k];
    Token t{is_float ? Tok::Float : Tok::Int, text, line_, 0, 0};
    if (is_float) t.fval = std::strtod(text.c_str(), nullptr);
    else t.ival = std::strtoll(text.c_str(), nullptr, 10);
    out_.push_back(t);
    pos_ = p;
  }

  void lex_string(char quote) {
    size_t p = pos_ + 1;
    while (p < s_.size() && s_[p] != quote) p += s_[p] == '\\' ? 2 : 1;
    if (p >= s_.size()) syntax_error(line_, std::string("unexpected char '") + quote + "'");
    push(Tok::String, unescape(std::string_view(s_).substr(pos_ + 1, p - pos_ - 1), line_));
    line_ += count_newlines(std::string_view(s_).substr(pos_, p - pos_));
    pos_ = p + 1;
  }

  void lex_operator(std::vector<char>& stack) {
    static const char* two[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : two) {
      if (at(pos_, op)) {
        push(Tok::Op, op);
        pos_ += 2;
        return;
      }
    }
    char c = s_[pos_];
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos)
      syntax_error(line_, std::string("unexpected char '") + c + "'");
    if (c == '(' || c == '[' || c == '{') {
      stack.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (stack.empty()) syntax_error(line_, std::string("unexpected '") + c + "'");
      if (stack.back() != c)
        syntax_error(line_, std::string("unexpected '") + c + "', expected '" + stack.back() + "'");
      stack.pop_back();
    }
    push(Tok::Op, std::string(1, c));
    ++pos_;
  }

  std::string s_;
  LexOptions opt_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> out_;
};

// \r\n and \r become \n; one trailing newline goes unless keep_trailing_newline.
std::string normalize(std::string_view src, bool keep_trailing_newline) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      out += '\n';
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      out += src[i];
    }
  }
  if (!keep_trailing_newline && !out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexOptions& opt) {
  return Lexer(normalize(source, opt.keep_trailing_newline), opt).run();
}

}  // namespace llmctl::jinja
