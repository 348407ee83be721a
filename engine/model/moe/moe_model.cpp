#include "engine/model/moe/moe_model.h"

#include "engine/core/error.h"
#include "engine/model/llama/llama.h"
#include "engine/model/moe/moe_weight_map.h"

namespace llmctl {

std::unique_ptr<Model> make_moe_model(const Checkpoint& ckpt, Backend& backend, std::optional<DType> weight_dtype,
                                      const ParallelContext& par) {
  check_llama_supported(ckpt.config);
  LLM_REQUIRE(backend.caps().moe) << ckpt.config.architecture << " is a mixture of experts, which backend "
                                  << backend.name() << " does not run yet (the CPU backend does)";
  // Llama's layer; its MLP step runs each sparse layer's MoeBlock (DecoderModel::run_mlp).
  return make_llama_layers_model(ckpt, backend, weight_dtype, par, moe_weight_sources(ckpt.config));
}

}  // namespace llmctl
