// The weights of a decoder made of the shared blocks (engine/model/layers/), and their one loader:
// a family gives its name map (engine/model/<family>/), the staged loader (load_weights.h) does
// the rest.
#pragma once
#include <optional>
#include <vector>

#include "engine/model/checkpoint.h"
#include "engine/model/kv_scales.h"
#include "engine/model/layers/attention_block.h"
#include "engine/model/layers/gated_mlp.h"
#include "engine/model/layers/moe_block.h"
#include "engine/model/layers/rms_norm.h"
#include "engine/model/weights/weight_source.h"
#include "engine/parallel/parallel_context.h"

namespace llmctl {

// The weights of a pre-norm decoder (engine/model/decoder_model.h) on a backend.
struct DecoderWeights {
  struct Layer {
    RmsNorm input_norm, post_norm;
    RmsNorm pre_ff_norm, post_ff_norm;  // Gemma's norms around the MLP (post_norm then follows attention); else empty
    AttentionBlock attention;
    GatedMlp mlp;  // a dense layer's
    MoeBlock moe;  // a mixture-of-experts layer's (empty in a dense layer)
  };
  DType weight_dtype = DType::F32;
  // [V, H] (tensor parallel: this rank's V / world ids): a dense table in weight_dtype, or, for a
  // tied quantized table on a backend that looks rows up in it, the quantized lm_head itself.
  LinearWeight embed;
  int64_t vocab_begin = 0;  // the first token id of embed's and lm_head's rows
  LinearWeight lm_head;   // [V, H]; shares embed's storage when tied
  RmsNorm final_norm;
  std::vector<Layer> layers;  // pipeline parallel: this stage's, from layer_begin
  int layer_begin = 0;
  std::vector<KvScales> kv_scales;  // fp8 KV cache scales per layer (host), empty when the checkpoint has none
};

// Checks the checkpoint against the config and uploads every weight its family's name map lists
// (`sources`: q/k/v fused, gate/up fused; linears in weight_dtype, or as stored when nullopt; norms
// and biases f32, every norm weight plus norm_offset: Gemma's (1 + w)): rank par.rank's Megatron
// share of each (engine/model/weights/megatron_split.h), after refusing a world size the shapes do
// not divide. Each layer's attention takes its window from the config.
DecoderWeights load_decoder_weights(const Checkpoint& ckpt, Backend& backend, std::optional<DType> weight_dtype,
                                    const ParallelContext& par, const std::vector<WeightSource>& sources,
                                    float norm_offset = 0.0f);

}  // namespace llmctl
