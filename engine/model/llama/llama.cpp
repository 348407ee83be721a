#include "engine/model/llama/llama.h"

#include <utility>

#include "engine/core/error.h"
#include "engine/model/decoder_model.h"
#include "engine/model/llama/llama_weight_map.h"
#include "engine/model/registry.h"

namespace llmctl {

void check_llama_supported(const ModelConfig& c) {
  // HF Llama's attention_bias also puts a bias on o_proj; Qwen2's is on q/k/v only, which is all
  // this family adds.
  LLM_REQUIRE(!c.attention_bias || find_architecture(c.architecture).attention_bias)
      << c.architecture << " with attention_bias (q/k/v and o_proj biases) is not supported: llmctl adds q/k/v "
      << "biases only (Qwen2ForCausalLM)";
}

namespace {

// Pre-norm layers: input norm (+ the previous layer's MLP out into the residual) -> attention ->
// post norm (+ attention out) -> gated MLP (or a MoE block).
class LlamaModel final : public DecoderModel {
 public:
  LlamaModel(const Checkpoint& ckpt, Backend& backend, std::optional<DType> weight_dtype, const ParallelContext& par,
             std::vector<WeightSource> sources)
      : DecoderModel(ckpt, backend, weight_dtype, par, std::move(sources)) {}

 private:
  void run_layers(const AttentionPlan& plan, LayerBuffers& b, std::vector<KvLayer>& kv) override {
    Backend& be = backend_;
    for (size_t i = 0; i < w_.layers.size(); ++i) {
      const DecoderWeights::Layer& L = w_.layers[i];
      if (first_layer(i))
        L.input_norm(be, b.residual, b.normed);
      else
        L.input_norm(be, b.hidden, b.normed, &b.residual);
      L.attention.run(be, plan, rope_of(w_.layer_begin + int(i)), b.normed, b.qkv, b.attn, kv[i], b.hidden);
      all_reduce(b.hidden);
      L.post_norm(be, b.hidden, b.normed, &b.residual);
      run_mlp(L, b.normed, b, b.hidden);  // dense, or a mixture of experts (engine/model/moe/)
      all_reduce(b.hidden);
    }
  }
};

}  // namespace

std::unique_ptr<Model> make_llama_model(const Checkpoint& ckpt, Backend& backend, std::optional<DType> weight_dtype,
                                        const ParallelContext& par) {
  check_llama_supported(ckpt.config);  // before any weight is read
  return std::make_unique<LlamaModel>(ckpt, backend, weight_dtype, par, llama_weight_sources(ckpt.config));
}

std::unique_ptr<Model> make_llama_layers_model(const Checkpoint& ckpt, Backend& backend,
                                               std::optional<DType> weight_dtype, const ParallelContext& par,
                                               std::vector<WeightSource> sources) {
  return std::make_unique<LlamaModel>(ckpt, backend, weight_dtype, par, std::move(sources));
}

}  // namespace llmctl
