#include "engine/model/phi3/phi3.h"

#include "engine/model/llama/llama.h"
#include "engine/model/phi3/phi3_weight_map.h"

namespace llmctl {

std::unique_ptr<Model> make_phi3_model(const Checkpoint& ckpt, Backend& backend, std::optional<DType> weight_dtype,
                                       const ParallelContext& par) {
  return make_llama_layers_model(ckpt, backend, weight_dtype, par, phi3_weight_sources(ckpt.config));
}

}  // namespace llmctl
