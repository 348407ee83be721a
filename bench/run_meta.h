// The "meta" block of a benchmark report: machine, build, and (for engine modes) the runtime —
// backend, device, model path, weights (what they are and how they run), threads, the dense weights'
// and the activations' dtypes, model shape.
#pragma once
#include <nlohmann/json.hpp>

#include "engine/runtime.h"

namespace llmctl::bench {

// machine + build; rt adds backend, device, model, weights, threads, dense_dtype (null: serve, which
// only knows a URL).
nlohmann::ordered_json run_meta(const Runtime* rt);

}  // namespace llmctl::bench
