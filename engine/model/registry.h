// The architecture registry: HF `architectures[0]` (and GGUF `general.architecture`, mapped to it)
// -> the family that runs it (a folder, engine/model/<family>/: its tensor list, weights and
// forward). A new family adds a row here and its folder; an architecture not listed is refused by
// name, before any weight is read.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/checkpoint.h"
#include "engine/model/model.h"
#include "engine/model/weight_spec.h"
#include "engine/model/weights/weight_source.h"
#include "engine/parallel/parallel_context.h"

namespace llmctl {

class GgufFile;

using ModelFactory = std::unique_ptr<Model> (*)(const Checkpoint&, Backend&, std::optional<DType>, const ParallelContext&);
// Every checkpoint tensor a config's model reads (HF names, shapes from the config).
using TensorSpecs = std::vector<WeightSpec> (*)(const ModelConfig&);

struct Architecture {
  const char* name;        // HF class name, e.g. "LlamaForCausalLM"
  const char* model_type;  // config.json model_type when absent
  const char* gguf_name;   // GGUF general.architecture read as this one, or nullptr
  bool attention_bias;     // q/k/v bias when config.json does not say
  bool sliding_window_by_default;  // config.json's sliding_window applies without use_sliding_window
  bool qk_norm;            // an RMSNorm over each head of q and of k before rope (Qwen3)
  bool gguf_qk_permuted;   // llama.cpp's converter permuted the q/k rows (its non-NEOX rope models)
  ModelFactory make;
  TensorSpecs tensor_specs;
  // GGUF specifics (unset: the Llama family's conventions): the config's parts the common <arch>.*
  // keys do not give; a layer tensor's HF name where it differs ("ffn_norm" -> ... ; nullptr: the
  // common one); a constant llama.cpp's converter added to every norm weight (taken off at load,
  // so the checkpoint is in HF form).
  void (*gguf_config)(const GgufFile&, ModelConfig&) = nullptr;
  const char* (*gguf_layer_name)(const std::string& part) = nullptr;
  float gguf_norm_shift = 0.0f;
  // > 0: without layer_types or sliding_window_pattern in config.json, layer l slides unless
  // (l + 1) % sliding_pattern == 0 (Gemma 2: 2, sliding and global layers alternating).
  int sliding_pattern = 0;
  // Where quantize's AWQ folds its scales: the norm a layer's MLP reads its input through, and the
  // constant the family adds to every norm weight when it runs (Gemma's (1 + w)).
  const char* mlp_input_norm = "post_attention_layernorm";
  float norm_offset = 0.0f;
  // The family's own config.json fields, read after the common ones (mixtures of experts).
  void (*hf_config)(const nlohmann::json&, ModelConfig&) = nullptr;
  // A family llama.cpp writes under another's general.architecture (Mixtral as "llama"): that
  // name, and how a file shows it is this family.
  const char* gguf_variant_of = nullptr;
  bool (*gguf_is_variant)(const GgufFile&) = nullptr;
  // Tensors llama.cpp stacks ([E, rows, cols], the experts' blk.N.ffn_*_exps): the HF name of
  // entry `index` of layer part `part`, or "" when the part is not stacked.
  std::string (*gguf_stacked_name)(const std::string& part, int layer, int index) = nullptr;
  // The family's name map where quantize needs more of it than a dense layer's HF modules: a
  // mixture of experts' routers, experts and shared experts (their roles, experts and HF names).
  std::vector<WeightSource> (*weight_sources)(const ModelConfig&) = nullptr;
};

// The registered architectures, in the order they are listed to users.
const std::vector<Architecture>& architectures();
// The entry for an HF architecture name; throws InputError naming it and the supported ones.
const Architecture& find_architecture(const std::string& hf_name);
// The HF architecture a GGUF general.architecture is read as; throws InputError naming it.
// With the file: a family written under another's name (Mixtral as "llama") when the file shows it.
const Architecture& find_gguf_architecture(const std::string& gguf_name, const GgufFile* file = nullptr);

// The tensors of c's architecture (its family's tensor_specs): what checkpoint readers, the quantizer
// and the random-model writer ask for, never a family by name.
std::vector<WeightSpec> model_tensor_specs(const ModelConfig& c);

// Builds the model of ckpt.config.architecture on `backend` (weights in weight_dtype, or as
// stored); under tensor parallelism, rank par.rank's share of it. Throws InputError for an
// architecture the registry does not run, or a world size the model's shapes do not divide.
std::unique_ptr<Model> make_model(const Checkpoint& ckpt, Backend& backend,
                                  std::optional<DType> weight_dtype = std::nullopt, const ParallelContext& par = {});

}  // namespace llmctl
