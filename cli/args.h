// The command line before and after CLI11 parses it: the spellings of other tools rewritten to
// llmctl's (vLLM's -tp/-pp, llama.cpp's -ngl), a bare --json made explicit, and unknown commands
// and options refused with the closest known name ("did you mean").
#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace llmctl::cli {

// argv[1..] with -tp -> --tensor-parallel-size, -pp -> --pipeline-parallel-size, -ngl ->
// --n-gpu-layers (CLI11 takes one-letter short names only), and `--json` not followed by "-" or a
// *.json / *.jsonl path -> `--json=-` (stdout), so `--json` means the same on every subcommand.
std::vector<std::string> normalize_args(std::vector<std::string> args);

// Throws CLI::ExtrasError when args' first word is not an option and names no subcommand of app
// (before parsing, so `llmctl bogus --help` fails instead of printing the help).
void check_command(const CLI::App& app, const std::vector<std::string>& args);

// After parsing an app with allow_extras: throws CLI::ExtrasError for what no option or positional
// took, naming the deepest parsed subcommand and the closest option it has.
void check_extras(CLI::App& app);

// The candidate closest to `word` by edit distance, if close enough to be a likely typo or a
// prefix of it; "" otherwise.
std::string closest_name(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace llmctl::cli
