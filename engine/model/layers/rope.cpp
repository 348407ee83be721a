#include "engine/model/layers/rope.h"

#include <algorithm>
#include <cmath>

namespace llmctl {
namespace {

// YaRN (transformers' _compute_yarn_parameters, f32 where it computes in f32): the dimensions whose
// wavelength fits in the original context many times keep their frequency (extrapolation), the
// longest are divided by the factor (interpolation), and a linear ramp blends the ones between.
void apply_yarn(const RopeScaling& s, float base, int dim, std::vector<float>& inv_freq) {
  // The dimension at which a frequency makes `rotations` turns over the original context.
  const auto correction_dim = [&](double rotations) {
    return double(dim) * std::log(double(s.original_max_position_embeddings) / (rotations * 2 * M_PI)) /
           (2 * std::log(double(base)));
  };
  double low = correction_dim(s.beta_fast), high = correction_dim(s.beta_slow);
  if (s.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0), high = std::min(high, double(dim - 1));
  if (low == high) high += 0.001;  // as the reference: no division by zero
  const float flow = float(low), span = float(high - low);
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const float pos_freq = std::pow(base, float(2 * i) / float(dim));  // as make_rope_params
    const float extrapolated = 1.0f / pos_freq, interpolated = 1.0f / (s.factor * pos_freq);
    const float ramp = std::clamp((float(i) - flow) / span, 0.0f, 1.0f);
    const float keep = 1.0f - ramp;  // the share of the extrapolated frequency
    inv_freq[i] = interpolated * (1.0f - keep) + extrapolated * keep;
  }
}

}  // namespace

RopeParams make_rope_params(const ModelConfig& c) {
  RopeParams p;
  p.head_dim = c.head_dim;
  const int dim = c.rotary();  // the dimensions that turn (partial rotary: fewer than head_dim)
  if (dim < c.head_dim) p.rotary_dim = dim;
  const int half = dim / 2;
  p.inv_freq.resize(half);
  for (int i = 0; i < half; ++i) {
    // As the reference: base ** (2i / dim) in f32, then its reciprocal.
    float expo = float(2 * i) / float(dim);
    p.inv_freq[i] = 1.0f / std::pow(c.rope_theta, expo);
  }
  const RopeScaling& s = c.rope_scaling;
  if (s.type == "freq_factors") {
    for (int i = 0; i < half; ++i) p.inv_freq[i] /= s.freq_factors[size_t(i)];
  } else if (s.type == "linear") {
    for (float& f : p.inv_freq) f /= s.factor;
  } else if (s.type == "yarn") {
    apply_yarn(s, c.rope_theta, dim, p.inv_freq);
    p.attention_scaling = s.attention_factor;
  } else if (s.type == "longrope") {  // 1 / (factor_i * base^(2i/D)) in f32, as the reference
    p.inv_freq_long.resize(half);
    for (int i = 0; i < half; ++i) {
      const float pos_freq = std::pow(c.rope_theta, float(2 * i) / float(dim));
      p.inv_freq[i] = 1.0f / (s.short_factor[size_t(i)] * pos_freq);
      p.inv_freq_long[i] = 1.0f / (s.long_factor[size_t(i)] * pos_freq);
    }
    p.long_from = s.original_max_position_embeddings;
    p.attention_scaling = s.attention_factor;
  } else if (s.type == "llama3") {
    const float old_len = float(s.original_max_position_embeddings);
    const float low_wavelen = old_len / s.low_freq_factor, high_wavelen = old_len / s.high_freq_factor;
    for (float& f : p.inv_freq) {
      const float wavelen = 2.0f * float(M_PI) / f;
      if (wavelen > low_wavelen) {
        f = f / s.factor;
      } else if (wavelen >= high_wavelen) {
        const float smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        f = (1.0f - smooth) * f / s.factor + smooth * f;
      }
    }
  }
  return p;
}

}  // namespace llmctl
