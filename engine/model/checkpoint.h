// A loaded checkpoint in canonical form: the ModelConfig plus tensors under their HF names
// ("model.layers.0.self_attn.q_proj.weight", shapes as in transformers, [out, in] for linears),
// whatever the source format. GGUF names are mapped and llama.cpp's q/k row permutation is undone
// so that every later stage sees one layout. The linear weights of a quantized checkpoint may stay
// quantized (LoadOptions::keep_quantized): they are then in `quantized`, under the same HF names.
// State of a quantized entry: deferred (GGUF: decoded on first read) -> decoded -> released
// (release_after_upload, once uploaded): quantized_entry.h.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/tensor.h"
#include "engine/model/config.h"
#include "engine/model/quantized_entry.h"

namespace llmctl {

class GgufFile;

struct Checkpoint {
  ModelConfig config;
  std::map<std::string, Tensor> tensors;  // HF names; host tensors (views into mappings or owned)
  // Linear weights kept quantized (LoadOptions::keep_quantized), by HF weight name
  // ("model.layers.0.self_attn.q_proj.weight"), [N, K] as the dense tensor would be; GGUF q/k rows
  // already unpermuted. A name is in `tensors` or here, never in both; embeddings are dense (a tied
  // table kept packed is here as lm_head.weight only: LoadOptions::quantized_embedding). A GGUF's
  // entries are deferred: each is decoded when first read (QuantizedEntry::weight()).
  std::map<std::string, QuantizedEntry> quantized;
  // Set by a caller that builds one model from this checkpoint (the runtime): once the loader
  // holds its own copy of a quantized weight (a rank's slice, on its way to the backend), it frees
  // the entry here (QuantizedEntry::release: the name stays, and a second load of it is refused).
  // Off by default: tests build several models from one checkpoint.
  bool release_after_upload = false;
  std::string source_path;                // the directory or .gguf file it came from
  std::string source_format;              // "hf" | "gguf"
  // Tokenizer sources, whichever the checkpoint has:
  std::string hf_dir;                      // for "hf": tokenizer.json, tokenizer_config.json, ...
  std::shared_ptr<const GgufFile> gguf;   // for "gguf": tokenizer.ggml.* metadata
  nlohmann::json generation_config;        // may be null
  // What load_checkpoint found worth a user's attention but not fatal (tensors the config does not
  // use); already written to stderr by load_checkpoint.
  std::vector<std::string> notes;

  const Tensor& get(const std::string& name) const;  // throws InputError naming a missing tensor
  bool has(const std::string& name) const { return tensors.count(name) != 0; }  // dense
  // Dense or kept quantized.
  bool has_weight(const std::string& name) const { return has(name) || quantized.count(name) != 0; }
};

struct LoadOptions {
  // Dtype the floating weights are given in. nullopt: keep the stored dtype (f32/f16/bf16 stay as
  // they are; GGUF quantized blocks are dequantized to f32).
  std::optional<DType> dtype;
  // Linear weights stored quantized (an HF quantization_config: compressed-tensors / AWQ / GPTQ; GGUF
  // block types with a group-affine form, gguf_group_affine.h): true keeps them in
  // Checkpoint::quantized, for a backend that runs Int4Group / Int8Group (generate, serve and bench
  // set it when theirs does); a weight with no group-affine form (uneven act-order g_idx, GGUF Q2_K, ...)
  // is dequantized anyway, with a note. false: every one is dequantized to a dense f32 tensor, as
  // convert, quantize and any caller that reads Checkpoint::tensors need. Embeddings are dense (but
  // see quantized_embedding).
  bool keep_quantized = false;
  // With keep_quantized, for a backend that looks embedding rows up in a packed table
  // (BackendCaps::quantized_embed): a GGUF embedding table of a block type is never dequantized to
  // floats: a tied one is kept only as the lm_head's quantized copy (Checkpoint::quantized
  // ["lm_head.weight"]), an untied one as Checkpoint::quantized["model.embed_tokens.weight"];
  // Checkpoint::tensors then has no model.embed_tokens.weight.
  bool quantized_embedding = false;
};

// Loads an HF directory (config.json + *.safetensors [+ index]) or a .gguf file.
// Pickled .bin checkpoints are refused with a message that says why. Every JSON file is read with
// the model-file limits (json_bounded.h) and every tensor is checked against the shape the config
// implies (check_checkpoint_tensors) before anything uses it. Throws InputError.
Checkpoint load_checkpoint(const std::string& path, const LoadOptions& opts = {});

// The checkpoint's ModelConfig alone (an HF directory's config.json, a GGUF file's metadata),
// validated, without reading a tensor: what a launcher checks sizes against before it starts
// ranks. A path load_checkpoint refuses is refused with the same message.
ModelConfig load_checkpoint_config(const std::string& path);

}  // namespace llmctl
