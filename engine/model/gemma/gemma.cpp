#include "engine/model/gemma/gemma.h"

#include <cmath>

#include "engine/model/decoder_model.h"
#include "engine/model/gemma/gemma_weight_map.h"

namespace llmctl {

namespace {

class GemmaModel final : public DecoderModel {
 public:
  GemmaModel(const Checkpoint& ckpt, Backend& backend, std::optional<DType> weight_dtype, const ParallelContext& par)
      : DecoderModel(ckpt, backend, weight_dtype, par, gemma_weight_sources(ckpt.config), /*norm_offset=*/1.0f) {}

 private:
  void after_embed(Tensor& residual) override { backend_.scale(residual, std::sqrt(float(config_.hidden_size))); }

  // Per layer (the stream is residual + hidden between layers, as the decoder wants it):
  //   normed = input_norm(stream); hidden = attention(normed); normed = post_norm(hidden);
  //   stream += normed; hidden = pre_ff_norm(stream); normed = mlp(hidden); hidden = post_ff_norm(normed)
  // Tensor parallel: the attention and MLP outputs are all-reduced before their norms.
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
      L.post_norm(be, b.hidden, b.normed);
      L.pre_ff_norm(be, b.normed, b.hidden, &b.residual);
      L.mlp.run(be, b.hidden, b.gate_up, b.act, b.normed);
      all_reduce(b.normed);
      L.post_ff_norm(be, b.normed, b.hidden);
    }
  }
};

}  // namespace

std::unique_ptr<Model> make_gemma_model(const Checkpoint& ckpt, Backend& backend, std::optional<DType> weight_dtype,
                                        const ParallelContext& par) {
  return std::make_unique<GemmaModel>(ckpt, backend, weight_dtype, par);
}

}  // namespace llmctl
