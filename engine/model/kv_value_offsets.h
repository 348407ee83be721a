// Per-channel value offsets for an fp8 KV cache: the side file `llmctl quantize --kv-cache fp8`
// writes beside the checkpoint, kv_cache_value_offsets.json.
//
// Why: e4m3 keeps 3 mantissa bits of each value. Values share a large per-channel mean, so storing
// v - offset (offset = the channel's calibrated mean) spends those bits on what differs between
// tokens. Attention adds the offset back: sum_j p_j (v_j - m) + m = sum_j p_j v_j, as the
// probabilities sum to 1. (Keys gain nothing: q.m is the same for every key of a query, so softmax
// cancels it; docs/PERFORMANCE.md has the study.)
//
// Why a side file: compressed-tensors has no field for it, and an extra tensor in the safetensors
// would trip loaders that refuse unknown weights. Other loaders ignore this file and see a plain
// fp8-KV checkpoint (its k_scale / v_scale are for the values as they are); llmctl, when the file is
// there, stores v - offset with the file's v_scale (calibrated on the centered values).
//
//   {"format": "llmctl.kv_cache_value_offsets", "version": 1,
//    "num_layers": L, "num_kv_heads": Hkv, "head_dim": D,
//    "layers": [{"v_scale": [Hkv], "v_offset": [[D] x Hkv]} x L]}
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace llmctl {

struct ModelConfig;

inline constexpr const char* kKvValueOffsetsFile = "kv_cache_value_offsets.json";

// One layer's calibration for the values of an fp8 cache.
struct KvValueOffsets {
  std::vector<float> v_scale;   // [Hkv]: e4m3 scale of v - offset, finite and > 0
  std::vector<float> v_offset;  // [Hkv * D]: row h is kv head h's offsets, finite
};

// The file's contents for `layers` (each of num_kv_heads scales and num_kv_heads * head_dim offsets).
nlohmann::json kv_value_offsets_json(const std::vector<KvValueOffsets>& layers, int num_kv_heads, int head_dim);

// Reads and validates the file at `path` against the model: the format and version, one entry per
// layer, Hkv scales and Hkv rows of D offsets in each, numbers only, scales finite and > 0, offsets
// finite. Throws InputError naming the file and what is wrong.
std::vector<KvValueOffsets> read_kv_value_offsets(const std::string& path, const ModelConfig& c);

}  // namespace llmctl
