// Jinja lexer: splits a template into text and tag tokens, applying whitespace control ('-' and
// '+' on tags) and the trim_blocks / lstrip_blocks rules exactly as jinja2's lexer does.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace llmctl::jinja {

enum class Tok { Data, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };

struct Token {
  Tok type;
  std::string text;  // Data text, name, decoded string literal, operator
  int line = 1;
  int64_t ival = 0;
  double fval = 0;
};

// transformers renders chat templates with trim_blocks and lstrip_blocks on; jinja2's default
// keep_trailing_newline=False drops one newline at the very end of the source.
struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

std::vector<Token> tokenize(std::string_view source, const LexOptions& opt = {});

// Throws InputError("chat template syntax error (line N): msg").
[[noreturn]] void syntax_error(int line, const std::string& msg);

}  // namespace llmctl::jinja
