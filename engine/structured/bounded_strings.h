// JSON strings with minLength / maxLength as character budgets, so that compiling them is cheap.
//
// xgrammar's JSON-schema converter writes a bounded string as `"` C{lo, hi} `"` (C: one character
// of the string) and unrolls the repetition into hi grammar positions, each with a token mask it
// precomputes over the whole vocabulary: on the default model's 49k tokens a 20-field schema with
// bounded strings took ~950 ms to compile against ~9 ms with the same strings unbounded. The same
// language as one position: a rule `name[max_chars=hi] ::= C ... C C*` (lo copies of C), whose
// budget xgrammar counts in code points, as JSON Schema counts a string's length (a minLength
// alone: the same rule without a budget).
//
// C is also narrowed to what JSON allows unescaped: the converter's own class for bounded strings
// lets control characters through (a tab inside a string is not JSON), its class for unbounded
// strings does not.
#pragma once
#include <optional>
#include <string>

namespace llmctl {

// ebnf: xgrammar's printed form of a JSON schema's grammar (Grammar::ToString). The same grammar
// with every bounded string rewritten as above, or nullopt when it has none or its minimums would
// write more than a few thousand characters (compile the grammar as it is then).
std::optional<std::string> budget_bounded_strings(const std::string& ebnf);

}  // namespace llmctl
