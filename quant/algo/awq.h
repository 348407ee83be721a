// AWQ (activation-aware weight quantization, Lin et al. 2023), as AutoAWQ / llm-compressor run it on
// a Llama decoder layer, before the final round-to-nearest quantization:
//  1. scales: for each smoothing pair (input_norm -> q,k,v; post_norm -> gate,up; up -> down; and
//     v -> o when their shapes match, i.e. without GQA) a grid of (ratio r, duo) points, as
//     llm-compressor 0.14 lays it out: with duo scaling, the identity (0, no duo) and then `grid - 1`
//     ratios from 0 to 1 inclusive; without, `grid` ratios from 0 to 1 inclusive:
//       s = mean|x|^r / mean_w^(1-r)  (duo; mean_w: per input column, the mean over rows of
//       |W| / max|W| of its group) or mean|x|^r, normalised by sqrt(max s * min s);
//     the loss is the MSE of the parent module's output (self-attention, MLP, down) with the pair's
//     weights fake-quantized as Q(W * s) / s against the unquantized output. The best s is folded:
//     the previous op's weight (norm, or v's / up's rows and v's bias) divided by s, the pair's
//     columns multiplied.
//  2. clipping (AutoAWQ's apply_clip; llm-compressor 0.14 has none): for every linear but q and k,
//     per (row, group) the clamp max|W| * (1 - i / clip_grid), i < max_shrink * clip_grid, that
//     minimises the MSE of the group's partial output on `clip_tokens` input rows; the weight is
//     clamped to it.
// The layer's function is unchanged by 1 (exactly, up to rounding) and changed by 2 only by clamping.
#pragma once
#include <string>

#include "quant/algo/calibration_forward.h"
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

// Step 1: searches and folds the scales into L. f runs the search (its samples may be a subset of
// the calibration batch); x [f.tokens(), H] is the layer's input on them.
AwqLayerReport awq_scale_layer(CalibrationForward& f, DenseLayer& L, const Tensor& x, const AwqOptions& o);
// Step 2 (nothing when o.max_shrink is 0): clips the scaled layer's weights; f and x as above.
void awq_clip_layer(CalibrationForward& f, DenseLayer& L, const Tensor& x, const AwqOptions& o);
// Both steps.
AwqLayerReport awq_layer(CalibrationForward& f, DenseLayer& L, const Tensor& x, const AwqOptions& o);

// out = dequantize(rtn_quantize(w)) for w [n, k]: the fake quantization AWQ searches with.
void fake_quantize(const float* w, int64_t n, int64_t k, const QuantScheme& s, float* out);

}  // namespace llmctl::quant
