#include "cli/constraint_flags.h"

#include <fstream>

#include "engine/core/error.h"

namespace llmctl::cli {

namespace {
// The file's text (a pipe too), refused past 1 MiB without reading further (the compiler takes
// at most 256 KiB).
std::string read_text(const std::string& flag, const std::string& path) {
  constexpr size_t kMax = size_t(1) << 20;
  std::ifstream in(path, std::ios::binary);
  LLM_REQUIRE(in) << flag << " " << path << ": cannot read the file";
  std::string text(kMax + 1, '\0');
  in.read(text.data(), std::streamsize(text.size()));
  text.resize(size_t(in.gcount()));
  LLM_REQUIRE(text.size() <= kMax) << flag << " " << path << ": over " << kMax << " bytes";
  return text;
}
}  // namespace

void add_constraint_flags(CLI::App* s, ConstraintFlags& f) {
  s->add_option("--json-schema", f.json_schema_file, "the output is JSON valid under the JSON schema in FILE");
  s->add_flag("--json-object", f.json_object, "the output is a JSON object");
  s->add_option("--regex", f.regex, "the output matches the regular expression");
  s->add_option("--grammar", f.grammar_file, "the output follows the EBNF (GBNF) grammar in FILE (rule `root`)");
  s->add_option("--choice", f.choices, "the output is one of these strings (repeatable)");
}

std::optional<ConstraintSpec> constraint_from_flags(const ConstraintFlags& f) {
  const int given = !f.json_schema_file.empty() + f.json_object + !f.regex.empty() + !f.grammar_file.empty() +
                    !f.choices.empty();
  LLM_REQUIRE(given <= 1) << "give at most one of --json-schema, --json-object, --regex, --grammar and --choice";
  if (given == 0) return std::nullopt;
  ConstraintSpec s;
  if (!f.json_schema_file.empty()) {
    s.kind = ConstraintKind::json_schema, s.text = read_text("--json-schema", f.json_schema_file);
    s.field = "--json-schema " + f.json_schema_file;
  } else if (f.json_object) {
    s.kind = ConstraintKind::json_object, s.field = "--json-object";
  } else if (!f.regex.empty()) {
    s.kind = ConstraintKind::regex, s.text = f.regex, s.field = "--regex";
  } else if (!f.grammar_file.empty()) {
    s.kind = ConstraintKind::grammar, s.text = read_text("--grammar", f.grammar_file);
    s.field = "--grammar " + f.grammar_file;
  } else {
    s.kind = ConstraintKind::choice, s.choices = f.choices, s.field = "--choice";
  }
  return s;
}

}  // namespace llmctl::cli
