// llmctl: one binary, five subcommands. Errors thrown inside are caught here and reported.
#include <iostream>
#include <map>

#include "cli/commands.h"
#include "engine/core/error.h"

int main(int argc, char** argv) {
  using namespace llmctl::cli;
  CLI::App app{"llmctl: run large language models (generate, serve, bench, quantize, convert)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "llmctl 0.1.0");
  std::map<std::string, Runner> runners;
  runners["generate"] = add_generate(app);
  runners["serve"] = add_serve(app);
  runners["bench"] = add_bench(app);
  runners["quantize"] = add_quantize(app);
  runners["convert"] = add_convert(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto* sub : app.get_subcommands()) return runners.at(sub->get_name())();
  } catch (const llmctl::InputError& e) {
    std::cerr << "llmctl: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "llmctl: internal error: " << e.what() << "\n";
    return 3;
  }
  return 0;
}
