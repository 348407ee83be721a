// llmctl: one binary, five subcommands. Errors thrown inside are caught here and reported.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>
#include <map>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "engine/parallel/launcher.h"
#include "engine/core/error.h"

namespace {
// Under mpirun, errors of ranks > 0 say which rank they come from.
std::string rank_prefix() {
  const int r = llmctl::launcher_rank();
  return r > 0 ? "rank " + std::to_string(r) + ": " : "";
}
}  // namespace

int main(int argc, char** argv) {
  using namespace llmctl::cli;
  CLI::App app{"llmctl: run large language models (generate, chat, serve, bench, quantize, convert)", "llmctl"};
  app.require_subcommand(1);
  app.allow_extras();  // inherited by the subcommands: check_extras reports what nothing took
  app.set_version_flag("--version", "llmctl 0.1.0");
  std::map<std::string, Runner> runners;
  runners["generate"] = add_generate(app);
  runners["chat"] = add_chat(app);
  runners["serve"] = add_serve(app);
  runners["bench"] = add_bench(app);
  runners["quantize"] = add_quantize(app);
  runners["convert"] = add_convert(app);
  set_command_line(argc, argv);
  std::vector<std::string> args = normalize_args({argv + 1, argv + argc});
  try {
    check_command(app, args);
    std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
    app.parse(args);
    check_extras(app);
  } catch (const CLI::ParseError& e) {
    // "A subcommand is required" for `bench latncy`: the stray word, with its closest name, says more.
    if (dynamic_cast<const CLI::RequiredError*>(&e)) try {
        check_extras(app);
      } catch (const CLI::ParseError& extra) {
        return app.exit(extra);
      }
    return app.exit(e);
  }
  try {
    for (auto* sub : app.get_subcommands()) return runners.at(sub->get_name())();
  } catch (const llmctl::InputError& e) {
    std::cerr << "llmctl: " << rank_prefix() << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path that cannot be written or read (permissions, a full disk): the user's to fix.
    std::cerr << "llmctl: " << rank_prefix() << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "llmctl: " << rank_prefix() << "internal error: " << e.what() << "\n";
    return 3;
  }
  return 0;
}
