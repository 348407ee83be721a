// safetensors: reader (memory-mapped, zero-copy views), writer, and sharded HF checkpoints
// (model.safetensors.index.json). Layout: u64 little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F16", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
// then the data section; offsets are relative to its start.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/mapped_file.h"
#include "engine/core/tensor.h"

namespace llmctl {

class SafetensorsFile {
 public:
  // Validates the whole header (length, JSON, dtypes, shapes vs byte ranges, bounds, overlaps).
  // Throws InputError naming the file and the problem.
  static std::shared_ptr<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return file_->path(); }
  // Host tensors viewing the mapping (they keep it alive); copies only for misaligned data.
  const std::map<std::string, Tensor>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  const Tensor& get(const std::string& name) const;  // throws InputError naming the tensor

 private:
  std::shared_ptr<MappedFile> file_;
  std::map<std::string, Tensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// "F32", "F16", "BF16", "I32", "I64", "I8", "U8" <-> DType.
const char* safetensors_dtype_name(DType t);

// Writes tensors (host, contiguous) in the given order, with optional string metadata. The header
// is padded with spaces to a multiple of 8 bytes so the data section stays aligned. Writes to a
// temporary file and renames it into place. Throws InputError on I/O errors or bad names.
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// An HF directory's weights: tensors (host, contiguous) in order, split into shards of at most
// max_shard_bytes (a larger tensor gets a shard of its own): model.safetensors alone, or
// model-0000i-of-0000n.safetensors with model.safetensors.index.json (removed when one shard).
struct ShardedWrite {
  size_t num_shards = 0;
  uint64_t total_bytes = 0;
};
ShardedWrite write_sharded_safetensors(const std::string& dir, const std::vector<std::pair<std::string, Tensor>>& tensors,
                                       uint64_t max_shard_bytes);

// All tensors of an HF directory: model.safetensors.index.json (shards listed in its weight_map)
// if present, else model.safetensors, else the only *.safetensors file. Views keep their mappings
// alive. Throws InputError when none is found or a shard is missing or inconsistent.
std::map<std::string, Tensor> load_safetensors_dir(const std::string& dir);

}  // namespace llmctl
