// One phrase for what a loaded checkpoint's linear weights are and how they run, for stats lines
// and benchmark reports: "Q4_1 GGUF, run quantized (int8 activations)", "Q4_1 GGUF, dequantized to
// f32", "int4 g64 compressed-tensors, run quantized (f32 activations)", "bf16".
#pragma once
#include <map>
#include <optional>
#include <string>

#include "engine/core/dtype.h"
#include "engine/model/checkpoint.h"

namespace llmctl {

// asked: the dtype dense weights are converted to (nullopt: as stored); act_quant: the CPU's
// activation mode when linears run quantized ("int8" | "none"), else null.
std::string describe_weights(const Checkpoint& ck, std::optional<DType> asked, const char* act_quant);

// How many of a GGUF's 2-D layer ("blk.*") weights each type holds, by ggml type label ("Q4_1", "F32").
std::map<std::string, int> gguf_layer_weight_types(const GgufFile& g);

}  // namespace llmctl
