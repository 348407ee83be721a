// Structured-output flags of `llmctl generate`: --json-schema FILE, --json-object, --regex R,
// --grammar FILE, --choice S (repeatable). One of them at most; with --prompts it is the default
// for lines that ask for none of their own.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "engine/structured/constraint.h"

namespace llmctl::cli {

struct ConstraintFlags {
  std::string json_schema_file, regex, grammar_file;
  std::vector<std::string> choices;
  bool json_object = false;
};

void add_constraint_flags(CLI::App* s, ConstraintFlags& f);

// The spec the flags ask for (nullopt: none). Throws InputError (two flags, an unreadable file).
std::optional<ConstraintSpec> constraint_from_flags(const ConstraintFlags& f);

}  // namespace llmctl::cli
