#include "engine/model/default_model.h"

#include <cstdlib>
#include <filesystem>

#include "engine/core/error.h"
#include "engine/model/hf_cache.h"

namespace fs = std::filesystem;

namespace llmctl {

std::string llmctl_home() {
  if (const char* h = std::getenv("LLMCTL_HOME"); h && *h) return h;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/llmctl";
}

std::string default_model_dir() { return llmctl_home() + "/models/" + DefaultModel::kName; }

std::string default_model_path() {
  const std::string gguf = default_model_dir() + "/" + DefaultModel::kGgufFile;
  return fs::is_regular_file(gguf) ? gguf : "";
}

std::string resolve_model(const std::string& arg) {
  if (!arg.empty()) {
    if (fs::exists(arg)) return arg;  // an existing local path always wins
    if (looks_like_hub_ref(arg)) return resolve_hf_cache_model(arg, hf_cache_env_from_process());
    LLM_THROW() << "model '" << arg << "' does not exist (give an HF directory, a .gguf file, or ORG/NAME of a "
                << "model in the Hugging Face cache)";
  }
  const std::string path = default_model_path();
  if (!path.empty()) return path;
  LLM_THROW() << "the default model " << DefaultModel::kName << " is not in " << default_model_dir()
              << " (run scripts/fetch-model.sh); pass --model";
}

}  // namespace llmctl
