// Calibrated fp8 KV cache scales, as compressed-tensors / llm-compressor store them beside the
// weights: model.layers.{i}.self_attn.k_scale and .v_scale, f32/f16/bf16 of shape [] or [1] (one
// scale for the layer's k or v) or [num_kv_heads] (one per kv head). x ~= e4m3(code) * scale.
#pragma once
#include <string>
#include <vector>

namespace llmctl {

struct Checkpoint;

// One layer's scales, one per kv head (a per-tensor scale is repeated for every head).
struct KvScales {
  std::vector<float> k, v;
};

// True for "model.layers.<i>.self_attn.k_scale" / "v_scale".
bool is_kv_scale_name(const std::string& name);

// The scales of every layer, or none when the checkpoint has no k_scale / v_scale at all. Throws
// InputError for a checkpoint that has some but not all of them, a shape other than [], [1] or
// [num_kv_heads], a non-float dtype, or a scale that is not finite and > 0.
std::vector<KvScales> load_kv_scales(const Checkpoint& ck);

}  // namespace llmctl
