#include "cli/fetch_model.h"

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "engine/core/error.h"
#include "engine/model/default_model.h"

#ifndef LLMCTL_SOURCE_DIR_STR
#define LLMCTL_SOURCE_DIR_STR ""
#endif

namespace fs = std::filesystem;

namespace llmctl::cli {

namespace {
// scripts/fetch-model.sh next to the sources this binary was built from, or $LLMCTL_FETCH_SCRIPT.
std::string fetch_script() {
  if (const char* s = std::getenv("LLMCTL_FETCH_SCRIPT"); s && *s) return s;
  return std::string(LLMCTL_SOURCE_DIR_STR) + "/scripts/fetch-model.sh";
}
}  // namespace

void fetch_default_model_if_absent(const std::string& model) {
  if (!model.empty()) return;
  const std::string path = default_model_path();
  if (!path.empty()) return;
  const std::string script = fetch_script();
  LLM_REQUIRE(fs::exists(script)) << "the default model " << DefaultModel::kName << " is not in " << default_model_dir()
                                  << " and the fetch script " << script << " is missing; pass --model";
  std::cerr << "llmctl: fetching the default model " << DefaultModel::kName << " into " << default_model_dir()
            << " (" << script << ")\n";
  // The script converts the GGUF with `llmctl convert`: this binary, unless LLMCTL_BIN names another.
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) setenv("LLMCTL_BIN", self.c_str(), /*overwrite=*/0);
  const std::string cmd = "bash '" + script + "' 1>&2";
  LLM_REQUIRE(std::system(cmd.c_str()) == 0) << "fetching the default model failed (see above); pass --model";
  LLM_REQUIRE(!default_model_path().empty()) << "the default model is still missing after fetching";
}

}  // namespace llmctl::cli
