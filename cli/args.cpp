#include "cli/args.h"

#include <algorithm>

namespace llmctl::cli {

namespace {
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "--name" spellings of every option of `app` (and "-x" short ones), for suggestions.
std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* o : app.get_options()) {
    for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
    for (const std::string& s : o->get_snames()) names.push_back("-" + s);
  }
  return names;
}

std::string command_path(const CLI::App& app) {
  std::string path = app.get_name();
  for (const CLI::App* p = app.get_parent(); p; p = p->get_parent()) path = p->get_name() + " " + path;
  return path;
}

std::vector<std::string> subcommand_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* s : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(s->get_name());
  return names;
}
}  // namespace

std::string closest_name(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::string::npos;
  const std::string bare = word.substr(0, word.find('='));
  for (const std::string& c : candidates) {
    size_t d = edit_distance(bare, c);
    // "--temp" for "--temperature": a prefix of at least 4 characters counts as close.
    if (bare.size() >= 4 && c.rfind(bare, 0) == 0) d = std::min<size_t>(d, 1);
    if (d < best_d) best = c, best_d = d;
  }
  const size_t limit = std::max<size_t>(2, bare.size() / 3);
  return best_d <= limit ? best : "";
}

std::vector<std::string> normalize_args(std::vector<std::string> args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-tp") out.push_back("--tensor-parallel-size");
    else if (a == "-pp") out.push_back("--pipeline-parallel-size");
    else if (a == "-ngl") out.push_back("--n-gpu-layers");
    else if (a == "--json") {
      const bool has_path = i + 1 < args.size() && (args[i + 1] == "-" || ends_with(args[i + 1], ".json") ||
                                                    ends_with(args[i + 1], ".jsonl"));
      out.push_back(has_path ? a : "--json=-");
    } else {
      out.push_back(a);
    }
  }
  return out;
}

void check_command(const CLI::App& app, const std::vector<std::string>& args) {
  if (args.empty() || args[0].empty() || args[0][0] == '-') return;
  const std::vector<std::string> names = subcommand_names(app);
  if (std::find(names.begin(), names.end(), args[0]) != names.end()) return;
  std::string msg = "unknown command '" + args[0] + "'";
  if (const std::string c = closest_name(args[0], names); !c.empty()) msg += "; did you mean '" + c + "'?";
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
  throw CLI::ExtrasError(msg + " (commands: " + list + ")", CLI::ExitCodes::ExtrasError);
}

void check_extras(CLI::App& app) {
  CLI::App* deepest = &app;
  for (bool found = true; found;) {
    found = false;
    for (CLI::App* s : deepest->get_subcommands())
      if (s->parsed()) deepest = s, found = true;
  }
  const std::vector<std::string> extras = app.remaining(true);
  if (extras.empty()) return;
  const std::string& first = extras.front();
  const std::string where = command_path(*deepest);
  std::string msg;
  if (first.size() > 1 && first[0] == '-') {
    msg = "unknown option '" + first + "' for '" + where + "'";
    if (const std::string c = closest_name(first, option_names(*deepest)); !c.empty())
      msg += "; did you mean '" + c + "'?";
  } else if (deepest->get_subcommands([](const CLI::App*) { return true; }).size() > 0) {
    msg = "unknown command '" + first + "' for '" + where + "'";
    if (const std::string c = closest_name(first, subcommand_names(*deepest)); !c.empty())
      msg += "; did you mean '" + c + "'?";
  } else {
    msg = "unexpected argument '" + first + "' for '" + where + "' (a prompt with spaces needs quotes)";
  }
  throw CLI::ExtrasError(msg + " (see '" + where + " --help')", CLI::ExitCodes::ExtrasError);
}

}  // namespace llmctl::cli
