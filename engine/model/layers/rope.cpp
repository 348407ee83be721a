#include "engine/model/layers/rope.h"

#include <cmath>

namespace llmctl {

RopeParams make_rope_params(const ModelConfig& c) {
  RopeParams p;
  p.head_dim = c.head_dim;
  const int half = c.head_dim / 2;
  p.inv_freq.resize(half);
  for (int i = 0; i < half; ++i) {
    // As the reference: base ** (2i / dim) in f32, then its reciprocal.
    float expo = float(2 * i) / float(c.head_dim);
    p.inv_freq[i] = 1.0f / std::pow(c.rope_theta, expo);
  }
  const RopeScaling& s = c.rope_scaling;
  if (s.type == "freq_factors") {
    for (int i = 0; i < half; ++i) p.inv_freq[i] /= s.freq_factors[size_t(i)];
  } else if (s.type == "linear") {
    for (float& f : p.inv_freq) f /= s.factor;
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
