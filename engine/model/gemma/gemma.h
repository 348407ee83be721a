// The Gemma family, Gemma 2 (Gemma2ForCausalLM) and Gemma 3 (Gemma3ForCausalLM: the text model;
// Gemma 3 1B and the text part of the larger ones): the shared decoder (engine/model/decoder_model.h)
// with Gemma's parts:
//   - embeddings scaled by sqrt(hidden);
//   - RMSNorms weighted by (1 + w), q/k head norms included (the loader adds the 1, in f32);
//   - "sandwich" norms: attention and MLP outputs are normalized before they join the residual;
//   - GeGLU MLP (hidden_activation gelu_pytorch_tanh), scores scaled by query_pre_attn_scalar^-1/2;
//   - sliding-window layers: Gemma 2 alternates them with global ones, Gemma 3 has five to one global,
//     with their own rope base;
//   - Gemma 2 only: no q/k head norms; attention scores and final logits soft-capped, c * tanh(x / c)
//     (ModelConfig::attn_logit_softcapping / final_logit_softcapping).
// Made through the registry (engine/model/registry.h).
#pragma once
#include <memory>
#include <optional>

#include "engine/model/checkpoint.h"
#include "engine/model/model.h"
#include "engine/parallel/parallel_context.h"

namespace llmctl {

std::unique_ptr<Model> make_gemma_model(const Checkpoint& ckpt, Backend& backend, std::optional<DType> weight_dtype,
                                        const ParallelContext& par);

}  // namespace llmctl
