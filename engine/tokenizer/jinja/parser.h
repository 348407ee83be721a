// Jinja parser: tokens to syntax tree, following the grammar and operator precedence of
// jinja2's parser (condexpr < or < and < not < compare < +,- < ~ < *,/,//,% < ** < unary <
// postfix/filters/tests).
#pragma once
#include <memory>
#include <string_view>

#include "engine/tokenizer/jinja/ast.h"
#include "engine/tokenizer/jinja/lexer.h"
#include "engine/tokenizer/jinja/limits.h"

namespace llmctl::jinja {

// Throws InputError with the line number on syntax errors, and on nesting deeper than
// `max_nesting` (so neither the parser nor the interpreter can run out of stack).
std::shared_ptr<const Template> parse_template(std::string_view source, const LexOptions& opt = {},
                                               int max_nesting = kMaxTemplateNesting);

}  // namespace llmctl::jinja
