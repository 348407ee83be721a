// The one place where logits become tokens. sample_step draws every row of a step's StepSampling
// from its logits on the backend that holds them: on the device (Backend::sample) where the
// backend samples and the sequence allows it (device_samplable, no token mask), on the host
// otherwise (its rows copied over: all of them when most are needed, else row by row). Token
// masks (DrawSpec::allowed) are applied to the raw row before the sampler's stages. Prompt rows
// are scored on the host (raw log-softmax, ids past the vocabulary left out).
#pragma once
#include "engine/backend/backend.h"
#include "engine/sample/step_sampling.h"

namespace llmctl {

// logits: f32 [rows, width] on the backend's device (or the host); width >= sampling.vocab.
// Appends each drawn token to its sequence's state.
StepOutput sample_step(Backend& backend, const Tensor& logits, const StepSampling& sampling);

}  // namespace llmctl
