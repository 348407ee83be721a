// AWQ (activation-aware weight quantization, Lin et al. 2023), as AutoAWQ / llm-compressor run it on
// a decoder layer, before the final round-to-nearest quantization; the layer runs as its family's
// forward (family_calibration.h):
//  1. scales: for each smoothing pair (input_norm -> q,k,v; the MLP's input norm -> gate,up; up -> down; and
//     v -> o when their shapes match, i.e. without GQA) a grid of (ratio r, duo) points, as
//     llm-compressor 0.14 lays it out: with duo scaling, the identity (0, no duo) and then `grid - 1`
//     ratios from 0 to 1 inclusive; without, `grid` ratios from 0 to 1 inclusive:
//       s = mean|x|^r / mean_w^(1-r)  (duo; mean_w: per input column, the mean over rows of
//       |W| / max|W| of its group) or mean|x|^r, normalised by sqrt(max s * min s);
//     the loss is the MSE of the parent module's output (self-attention, MLP, down) with the pair's
//     weights fake-quantized as Q(W * s) / s against the unquantized output. The best s is folded:
//     the previous op's weight (norm, or v's / up's rows and v's bias) divided by s, the pair's
//     columns multiplied; a norm run as (1 + w) (Gemma) becomes (1 + w) / s - 1.
//  2. clipping (AutoAWQ's apply_clip; llm-compressor 0.14 has none): for every linear but q and k,
//     per (row, group) the clamp max|W| * (1 - i / clip_grid), i < max_shrink * clip_grid, that
//     minimises the MSE of the group's partial output on `clip_tokens` input rows; the weight is
//     clamped to it.
// The layer's function is unchanged by 1 (exactly, up to rounding) and changed by 2 only by clamping.
#pragma once
#include <string>

#include "quant/algo/dense_layer.h"
#include "quant/algo/family_calibration.h"
#include "quant/format/quantized_linear.h"

namespace llmctl::quant {

struct AwqOptions {
  QuantScheme scheme;
  int grid = 20;
  bool duo_scaling = true;
  double max_shrink = 0.5;  // 0: no clipping
  int clip_grid = 20;
  int clip_tokens = 512;
};

struct AwqLayerReport {
  double ratio_attn = 0, ratio_mlp = 0, ratio_down = 0, ratio_o = -1;  // chosen ratios (-1: pair skipped)
  double loss_before = 0, loss_after = 0;  // MLP-output MSE with RTN at ratio 0 vs the chosen ratio
};

// The inputs of a layer's four linear groups on the search batch, [T, K] f32 each, as the layer runs
// unquantized: q/k/v's (attn_in), o's, gate/up's (mlp_in) and down's.
struct AwqInputs {
  Tensor attn_in, o_in, mlp_in, down_in;
};
// One probe of f's built layer (the search batch through the family's own forward).
AwqInputs awq_inputs(FamilyCalibration& f);

// Step 1: searches and folds the scales into L (the built layer of f, as DenseLayer::from_checkpoint
// reads it); the losses come from probes of f with trial weights. `in` (awq_inputs of the layer)
// becomes the scaled layer's inputs (each divided by the scales folded before its linear).
AwqLayerReport awq_scale_layer(FamilyCalibration& f, DenseLayer& L, AwqInputs& in, const AwqOptions& o);
// Step 2 (nothing when o.max_shrink is 0): clips the scaled layer's weights on its inputs `in`.
void awq_clip_layer(DenseLayer& L, const AwqInputs& in, const AwqOptions& o);

// out = dequantize(rtn_quantize(w)) for w [n, k]: the fake quantization AWQ searches with.
void fake_quantize(const float* w, int64_t n, int64_t k, const QuantScheme& s, float* out);

}  // namespace llmctl::quant
