#include <iostream>

#include "cli/commands.h"

namespace llmctl::cli {

Runner add_not_landed(CLI::App& app, const char* name, const char* description, const char* what) {
  auto* sub = app.add_subcommand(name, description);
  sub->allow_extras();
  std::string n = name, w = what;
  return [n, w] {
    std::cerr << "llmctl " << n << ": not available yet (" << w << " has not landed in this build)\n";
    return 2;
  };
}

}  // namespace llmctl::cli
