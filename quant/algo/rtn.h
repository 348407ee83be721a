// Round to nearest (RTN): each group's scale and zero point from its min/max, every weight rounded
// on its own. Bit-exact with compressed-tensors' MinMax observer + quantize (calculate_qparams,
// fake_quantize) in fp32, translated to QuantizedLinear's unsigned convention:
//   signed range [qmin, qmax] = [-2^(bits-1), 2^(bits-1) - 1] (int4: [-8, 7]);
//   min' = min(min, 0), max' = max(max, 0)                 (0 is always representable)
//   symmetric:  scale = max(|min'|, |max'|) / ((qmax - qmin) / 2)   (int4: absmax / 7.5), zero 0
//   asymmetric: scale = (max' - min') / (qmax - qmin);  zero = round(clamp(qmin - min'/scale, qmin, qmax))
//   scale 0 (an all-zero group) becomes FLT_EPSILON, as there;
//   code = round(clamp(w / scale + zero, qmin, qmax)), rounding half to even (torch.round).
// QuantizedLinear stores code - qmin and zero - qmin (int4: +8), so symmetric zeros are 2^(bits-1)
// and (q - zero) * scale is unchanged.
#pragma once
#include <cstdint>
#include <vector>

#include "quant/format/quantized_linear.h"

namespace llmctl::quant {

// Scale and (unsigned, QuantizedLinear's convention) zero point of one group from its min and max.
// Exported for AWQ's clipping search, which shrinks min/max and re-derives them.
void group_qparams(float min, float max, const QuantScheme& s, float* scale, int32_t* zero);

// The unsigned code of one value under (scale, unsigned zero): compressed-tensors' rounding.
uint8_t quantize_value(float w, float scale, int32_t zero, const QuantScheme& s);

// w [n, k] row-major f32 -> codes, scales, zeros of every row and group. Throws
// std::invalid_argument when the scheme does not fit k (QuantScheme::check).
QuantizedLinear rtn_quantize(const float* w, int64_t n, int64_t k, const QuantScheme& s);

// Scales and zeros only ([n, groups] each, as in QuantizedLinear) of w [n, k]: what GPTQ fixes
// before it starts (llm-compressor's observer runs on the weight before GPTQ changes it).
void rtn_qparams(const float* w, int64_t n, int64_t k, const QuantScheme& s, std::vector<float>& scales,
                 std::vector<int32_t>& zeros);

}  // namespace llmctl::quant
