#include "engine/model/default_model.h"

#include <cstdlib>
#include <filesystem>

#include "engine/core/error.h"

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

std::string resolve_model(const std::string& arg) {
  if (!arg.empty()) {
    LLM_REQUIRE(fs::exists(arg)) << "model '" << arg << "' does not exist";
    return arg;
  }
  const std::string path = default_model_path();
  if (!path.empty() && fs::is_directory(path)) return path;
  LLM_THROW() << "the default model " << DefaultModel::kName << " is not in " << default_model_dir()
              << " (run scripts/fetch-model.sh); pass --model";
}

}  // namespace llmctl
