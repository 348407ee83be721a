#include "engine/model/default_model.h"

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "engine/core/error.h"

#ifndef LLMCTL_SOURCE_DIR_STR
#define LLMCTL_SOURCE_DIR_STR ""
#endif

namespace fs = std::filesystem;

namespace llmctl {

std::string llmctl_home() {
  if (const char* h = std::getenv("LLMCTL_HOME"); h && *h) return h;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/llmctl";
}

std::string default_model_dir() { return llmctl_home() + "/models/" + DefaultModel::kName; }

std::string default_model_path() {
  const std::string dir = default_model_dir();
  if (fs::exists(dir + "/hf/config.json")) return dir + "/hf";
  if (fs::exists(dir + "/" + DefaultModel::kGgufFile)) return dir + "/" + DefaultModel::kGgufFile;
  return "";
}

namespace {
// scripts/fetch-model.sh next to the sources this binary was built from, or $LLMCTL_FETCH_SCRIPT.
std::string fetch_script() {
  if (const char* s = std::getenv("LLMCTL_FETCH_SCRIPT"); s && *s) return s;
  return std::string(LLMCTL_SOURCE_DIR_STR) + "/scripts/fetch-model.sh";
}
}  // namespace

std::string resolve_model(const std::string& arg) {
  if (!arg.empty()) {
    LLM_REQUIRE(fs::exists(arg)) << "model '" << arg << "' does not exist";
    return arg;
  }
  std::string path = default_model_path();
  if (!path.empty() && fs::is_directory(path)) return path;
  const std::string script = fetch_script();
  LLM_REQUIRE(fs::exists(script)) << "the default model " << DefaultModel::kName << " is not in " << default_model_dir()
                                  << " and the fetch script " << script << " is missing; pass --model";
  std::cerr << "llmctl: fetching the default model " << DefaultModel::kName << " into " << default_model_dir()
            << " (" << script << ")\n";
  const std::string cmd = "bash '" + script + "' 1>&2";
  LLM_REQUIRE(std::system(cmd.c_str()) == 0) << "fetching the default model failed (see above); pass --model";
  path = default_model_path();
  LLM_REQUIRE(!path.empty()) << "the default model is still missing after fetching";
  return path;
}

}  // namespace llmctl
