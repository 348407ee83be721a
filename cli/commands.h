// Each subcommand registers its flags on the app and returns the exit code when it runs.
#pragma once
#include <functional>

#include <CLI/CLI.hpp>

namespace llmctl::cli {

using Runner = std::function<int()>;

Runner add_generate(CLI::App& app);
Runner add_convert(CLI::App& app);
Runner add_serve(CLI::App& app);
Runner add_bench(CLI::App& app);
Runner add_quantize(CLI::App& app);
Runner add_chat(CLI::App& app);

}  // namespace llmctl::cli
