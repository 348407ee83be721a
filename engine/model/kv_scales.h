// Calibrated fp8 KV cache scales, as compressed-tensors / llm-compressor store them beside the
// weights: model.layers.{i}.self_attn.k_scale and .v_scale, f32/f16/bf16 of shape [] or [1] (one
// scale for the layer's k or v) or [num_kv_heads] (one per kv head). x ~= e4m3(code) * scale.
// With llmctl's side file (engine/model/kv_value_offsets.h) values also have a per-channel offset:
// v ~= e4m3(code) * v_scale + v_offset, v_scale then the file's.
#pragma once
#include <string>
#include <vector>

namespace llmctl {

struct Checkpoint;

// One layer's scales, one per kv head (a per-tensor scale is repeated for every head).
struct KvScales {
  std::vector<float> k, v;
  std::vector<float> v_offset;  // [Hkv * D] (kv head h's row at h * D), or empty: none
};

// True for "model.layers.<i>.self_attn.k_scale" / "v_scale".
bool is_kv_scale_name(const std::string& name);

// The scales of every layer, or none when the checkpoint has no k_scale / v_scale at all, with the
// value offsets of an HF directory's kv_cache_value_offsets.json when it has one. Throws InputError
// for a checkpoint that has some but not all of them, a shape other than [], [1] or [num_kv_heads],
// a non-float dtype, a scale that is not finite and > 0, an offsets file without scales, or an
// offsets file read_kv_value_offsets refuses.
std::vector<KvScales> load_kv_scales(const Checkpoint& ck);

}  // namespace llmctl
