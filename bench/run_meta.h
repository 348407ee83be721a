// The "meta" block of a benchmark report: machine, build, and (for engine modes) the runtime —
// backend, device, model path, weight and activation dtypes, model shape.
#pragma once
#include <nlohmann/json.hpp>

#include "engine/runtime.h"

namespace llmctl::bench {

// machine + build; rt adds backend, device, model, dtype (null: serve, which only knows a URL).
nlohmann::ordered_json run_meta(const Runtime* rt);

}  // namespace llmctl::bench
