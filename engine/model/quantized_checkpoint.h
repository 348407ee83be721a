// Reading an HF checkpoint whose config.json has a "quantization_config" (compressed-tensors
// pack-quantized, AutoAWQ GEMM or GPTQ v1, as llm-compressor, AutoAWQ and GPTQModel write them):
// for now every quantized linear is dequantized at load to a dense f32 "<prefix>.weight", so every
// later stage sees a dense checkpoint (running them packed is the next step of the weight-format
// seam). The parsed config is kept on ModelConfig::source_quantization.
#pragma once
#include <nlohmann/json.hpp>

#include "engine/model/checkpoint.h"

namespace llmctl {

// If config_json has a quantization_config: parses it (an unknown or unsupported one is refused by
// name, InputError) into ck.config.source_quantization, then replaces the packed tensors of each
// quantized module ("<prefix>.weight_packed" ... / "<prefix>.qweight" ...) by "<prefix>.weight"
// [N, K] f32, with N and K from the shapes ck.config implies (llama_tensor_specs). A packed module
// the model does not have, a module both packed and dense, or a bad packed tensor is an InputError
// naming it. Other tensors (norms, embeddings, compressed-tensors' self_attn.k_scale / v_scale of a
// kv_cache_scheme) are left as they are. Without a quantization_config, does nothing.
void dequantize_quantized_linears(Checkpoint& ck, const nlohmann::json& config_json);

}  // namespace llmctl
