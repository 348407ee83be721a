#include "bench/run_meta.h"

#include <ctime>

#include "bench/machine_info.h"
#include "engine/core/dtype.h"

namespace llmctl::bench {

nlohmann::ordered_json run_meta(const Runtime* rt) {
  nlohmann::ordered_json m;
  char when[32];
  std::time_t now = std::time(nullptr);
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  m["date"] = when;
  m["machine"] = machine_info();
  m["build"] = build_info();
  if (rt) {
    m["backend"] = rt->backend->name();
    m["backend_caps"] = rt->backend->caps().describe();
    m["device"] = rt->backend->device() == Device::CPU ? "cpu" : "cuda";
    m["model"] = rt->model_path;
    m["weights"] = rt->weights;
    m["threads"] = rt->threads;
    m["dense_dtype"] = dtype_name(rt->executor->weight_dtype());  // of the weights not kept quantized
    m["activation_dtype"] = dtype_name(rt->backend->activation_dtype());
    m["model_layers"] = rt->config.num_layers;
    m["model_hidden"] = rt->config.hidden_size;
    m["load_seconds"] = rt->load_seconds;
  }
  return m;
}

}  // namespace llmctl::bench
