// Reading an HF checkpoint whose config.json has a "quantization_config" (compressed-tensors
// pack-quantized, AutoAWQ GEMM or GPTQ v1, as llm-compressor, AutoAWQ and GPTQModel write them):
// each quantized linear becomes "<prefix>.weight", either kept quantized in group-affine form
// (Checkpoint::quantized, for a backend that runs it) or dequantized to a dense f32 tensor. The
// parsed config is kept on ModelConfig::source_quantization.
#pragma once
#include <nlohmann/json.hpp>

#include "engine/model/checkpoint.h"

namespace llmctl {

// If config_json has a quantization_config: parses it (an unknown or unsupported one is refused by
// name, InputError) into ck.config.source_quantization, then replaces the packed tensors of each
// quantized module ("<prefix>.weight_packed" ... / "<prefix>.qweight" ...) by "<prefix>.weight"
// [N, K], with N and K from the shapes ck.config implies (model_tensor_specs):
//   keep_quantized: a GroupAffineWeight in ck.quantized, or, for a weight with no group-affine form
//                   (act-order g_idx with groups of unequal size: group_affine_from_quantized; an
//                   even act-order one is kept, its columns permuted), dense f32 in ck.tensors with one
//                   note in ck.notes naming how many and why (written to stderr by load_checkpoint);
//   otherwise:      dense f32 in ck.tensors, (q - zero) * scale as it always was.
// A packed module
// the model does not have, a module both packed and dense, or a bad packed tensor is an InputError
// naming it. Other tensors (norms, embeddings, compressed-tensors' self_attn.k_scale / v_scale of a
// kv_cache_scheme) are left as they are. Without a quantization_config, does nothing.
void read_quantized_linears(Checkpoint& ck, const nlohmann::json& config_json, bool keep_quantized);

}  // namespace llmctl
