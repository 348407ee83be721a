// convert: any checkpoint llmctl reads -> an HF directory (config.json, safetensors shards with
// an index when more than one, tokenizer.json, tokenizer_config.json, generation_config.json).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "engine/core/dtype.h"
#include "engine/model/checkpoint.h"
#include "engine/tokenizer/tokenizer.h"

namespace llmctl {

struct ConvertOptions {
  std::string input, output;
  std::optional<DType> dtype;          // nullopt: as stored (quantized GGUF tensors become f32)
  uint64_t max_shard_bytes = 2000000000;
};

struct ConvertReport {
  size_t num_tensors = 0, num_shards = 0;
  uint64_t total_bytes = 0;
};

// "2GB", "500MB", "1.5GiB", "123" (bytes). Throws InputError.
uint64_t parse_byte_size(const std::string& s);

// The files beside the weights of an HF directory: tokenizer.json, tokenizer_config.json (an HF
// source's own, copied; a GGUF source's vocabulary written out) and generation_config.json (with
// bos/eos/pad ids filled in from the tokenizer). Shared by convert and quantize.
void write_tokenizer_files(const Checkpoint& ck, const Tokenizer& tok, const std::string& dir);

// warn receives messages worth a user's attention (e.g. bf16 values that overflow f16).
ConvertReport convert_checkpoint(const ConvertOptions& opts, const std::function<void(const std::string&)>& warn);

}  // namespace llmctl
