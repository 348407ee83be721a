#include "engine/model/moe/moe_model.h"

#include <utility>

#include "engine/core/error.h"
#include "engine/model/decoder_model.h"
#include "engine/model/llama/llama.h"
#include "engine/model/moe/moe_weight_map.h"

namespace llmctl {

namespace {

class MoeModel final : public DecoderModel {
 public:
  MoeModel(const Checkpoint& ckpt, Backend& backend, std::optional<DType> weight_dtype, const ParallelContext& par)
      : DecoderModel(ckpt, backend, weight_dtype, par, moe_weight_sources(ckpt.config)) {}

 private:
  void run_layers(const AttentionPlan& plan, LayerBuffers& b, std::vector<KvLayer>& kv) override {
    Backend& be = backend_;
    MoeBlock::Scratch scratch{b.router, b.expert_in, b.expert_out, b.gate_up, b.act};
    for (size_t i = 0; i < w_.layers.size(); ++i) {
      const DecoderWeights::Layer& L = w_.layers[i];
      if (first_layer(i))
        L.input_norm(be, b.residual, b.normed);
      else
        L.input_norm(be, b.hidden, b.normed, &b.residual);
      L.attention.run(be, plan, rope_of(w_.layer_begin + int(i)), b.normed, b.qkv, b.attn, kv[i], b.hidden);
      all_reduce(b.hidden);
      L.post_norm(be, b.hidden, b.normed, &b.residual);
      if (L.moe.empty())
        L.mlp.run(be, b.normed, b.gate_up, b.act, b.hidden);
      else
        L.moe.run(be, b.normed, scratch, b.hidden);
      all_reduce(b.hidden);
    }
  }
};

}  // namespace

std::unique_ptr<Model> make_moe_model(const Checkpoint& ckpt, Backend& backend, std::optional<DType> weight_dtype,
                                      const ParallelContext& par) {
  check_llama_supported(ckpt.config);
  LLM_REQUIRE(backend.caps().moe) << ckpt.config.architecture << " is a mixture of experts, which backend "
                                  << backend.name() << " does not run yet (the CPU backend does)";
  return std::make_unique<MoeModel>(ckpt, backend, weight_dtype, par);
}

}  // namespace llmctl
