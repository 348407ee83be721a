// load_checkpoint: dispatch on what the path is (HF directory, .gguf file, pickle) and bring the
// result to canonical form (see checkpoint.h).
#include "engine/model/checkpoint.h"

#include <filesystem>
#include <iostream>

#include "engine/core/error.h"
#include "engine/core/json_bounded.h"
#include "engine/model/finite_weights.h"
#include "engine/model/gguf.h"
#include "engine/model/llama/gguf_llama.h"
#include "engine/model/check_tensors.h"
#include "engine/model/quantized_checkpoint.h"
#include "engine/model/safetensors.h"

namespace llmctl {

namespace fs = std::filesystem;
using nlohmann::json;

const Tensor& Checkpoint::get(const std::string& name) const {
  auto it = tensors.find(name);
  LLM_REQUIRE(it != tensors.end()) << "checkpoint '" << source_path << "' has no tensor '" << name << "'";
  return it->second;
}

namespace {

bool is_pickle_name(const fs::path& p) {
  std::string ext = p.extension().string();
  return ext == ".bin" || ext == ".pt" || ext == ".pth" || ext == ".ckpt";
}

// head: what was found, e.g. "'x.bin' is a pickled PyTorch checkpoint".
[[noreturn]] void refuse_pickle(const std::string& head) {
  LLM_THROW() << head << "; llmctl does not load pickle files because loading "
              << "them can execute arbitrary code. Convert it to safetensors first, e.g. in Python: "
              << "AutoModelForCausalLM.from_pretrained(dir).save_pretrained(out_dir, safe_serialization=True)";
}

json read_json_file(const fs::path& p) { return read_json_file_bounded(p.string(), kModelJsonLimits); }

// The tensors against the config and finite, then the notes (those of the readers, and tensors
// accepted unused) to stderr.
void check_tensors(Checkpoint& ck) {
  for (std::string& n : check_checkpoint_tensors(ck)) ck.notes.push_back(std::move(n));
  refuse_non_finite_weights(ck);
  for (const std::string& n : ck.notes) std::cerr << "llmctl: note: " << n << "\n";
}

Checkpoint load_hf_dir(const fs::path& dir, const LoadOptions& opts) {
  bool has_safetensors = false, has_pickle = false;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".safetensors" || e.path().filename() == "model.safetensors.index.json")
      has_safetensors = true;
    else if (is_pickle_name(e.path()))
      has_pickle = true;
  }
  LLM_REQUIRE(!ec) << "cannot list '" << dir.string() << "': " << ec.message();
  if (!has_safetensors && has_pickle)
    refuse_pickle("'" + dir.string() + "' holds only pickled PyTorch checkpoints (pytorch_model.bin / *.bin / *.pt)");
  LLM_REQUIRE(fs::exists(dir / "config.json"))
      << "'" << dir.string() << "' has no config.json (not an HF model directory)";

  Checkpoint ck;
  const json config_json = read_json_file(dir / "config.json");
  ck.config = parse_hf_config(config_json);
  ck.source_path = dir.string();
  ck.source_format = "hf";
  ck.hf_dir = dir.string();
  if (fs::exists(dir / "generation_config.json")) ck.generation_config = read_json_file(dir / "generation_config.json");
  ck.tensors = load_safetensors_dir(dir.string());
  read_quantized_linears(ck, config_json, opts.keep_quantized);  // dense f32 or ck.quantized from here on
  LLM_REQUIRE(ck.has("model.embed_tokens.weight"))
      << "'" << dir.string() << "' has no model.embed_tokens.weight tensor";
  LLM_REQUIRE(ck.config.tie_word_embeddings || ck.has_weight("lm_head.weight"))
      << "'" << dir.string() << "' has no lm_head.weight and config.json does not tie word embeddings";
  check_tensors(ck);  // before any conversion reads a tensor
  if (opts.dtype) {
    for (auto& [name, t] : ck.tensors) {
      bool floating = t.dtype == DType::F32 || t.dtype == DType::F16 || t.dtype == DType::BF16;
      if (floating && t.dtype != *opts.dtype) t = convert_host(t, *opts.dtype);
    }
  }
  return ck;
}

}  // namespace

Checkpoint load_checkpoint(const std::string& path, const LoadOptions& opts) {
  fs::path p(path);
  std::error_code ec;
  LLM_REQUIRE(fs::exists(p, ec)) << "checkpoint '" << path << "' does not exist";
  if (fs::is_directory(p, ec)) return load_hf_dir(p, opts);
  if (is_pickle_name(p)) refuse_pickle("'" + path + "' is a pickled PyTorch checkpoint");
  if (p.extension() == ".gguf") {
    Checkpoint ck = load_gguf_checkpoint(GgufFile::open(path), opts);  // checks the tensors itself
    for (const std::string& n : ck.notes) std::cerr << "llmctl: note: " << n << "\n";
    return ck;
  }
  LLM_THROW() << "'" << path << "' is neither an HF model directory nor a .gguf file";
}

ModelConfig load_checkpoint_config(const std::string& path) {
  const fs::path p(path);
  std::error_code ec;
  if (fs::is_directory(p, ec) && fs::is_regular_file(p / "config.json", ec))
    return parse_hf_config(read_json_file(p / "config.json"));
  if (p.extension() == ".gguf" && fs::is_regular_file(p, ec)) return gguf_llama_config(*GgufFile::open(path));
  // Anything else is refused by load_checkpoint before it reads a tensor (no such path, a pickle,
  // a directory without config.json): the same message.
  return load_checkpoint(path).config;
}

}  // namespace llmctl
