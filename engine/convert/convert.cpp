#include "engine/convert/convert.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/core/partial_output.h"
#include "engine/model/checkpoint.h"
#include "engine/model/safetensors.h"
#include "engine/tokenizer/tokenizer.h"

namespace fs = std::filesystem;

namespace llmctl {

uint64_t parse_byte_size(const std::string& s) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (const std::exception&) {
    LLM_THROW() << "cannot read a size from '" << s << "' (e.g. 500MB, 2GB)";
  }
  std::string unit = s.substr(pos);
  for (auto& c : unit) c = char(std::toupper(static_cast<unsigned char>(c)));
  double mul = 1;
  if (unit == "" || unit == "B") mul = 1;
  else if (unit == "KB") mul = 1e3;
  else if (unit == "MB") mul = 1e6;
  else if (unit == "GB") mul = 1e9;
  else if (unit == "KIB") mul = 1024.0;
  else if (unit == "MIB") mul = 1024.0 * 1024;
  else if (unit == "GIB") mul = 1024.0 * 1024 * 1024;
  else LLM_THROW() << "unknown size unit '" << unit << "' in '" << s << "'";
  LLM_REQUIRE(v > 0 && std::isfinite(v)) << "size must be positive: '" << s << "'";
  return uint64_t(v * mul);
}

namespace {

void write_json(const fs::path& path, const nlohmann::json& j) {
  std::ofstream out(path);
  LLM_REQUIRE(out) << "cannot write " << path.string();
  out << j.dump(2) << "\n";
  LLM_REQUIRE(out.good()) << "error writing " << path.string();
}

// Counts values of a bf16/f32 tensor that overflow f16's range (|x| > 65504).
int64_t count_f16_overflow(const Tensor& t) {
  int64_t n = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    float f = t.dtype == DType::BF16 ? bf16_to_f32(t.ptr<uint16_t>()[i]) : t.ptr<float>()[i];
    if (std::fabs(f) > 65504.0f) ++n;
  }
  return n;
}

}  // namespace

void write_tokenizer_files(const Checkpoint& ck, const Tokenizer& tok, const std::string& dir) {
  const fs::path out(dir);
  // Tokenizer: an HF source keeps its own files; a GGUF source gets them written from its vocab.
  bool copied = false;
  if (ck.source_format == "hf" && fs::exists(fs::path(ck.hf_dir) / "tokenizer.json")) {
    for (const char* f : {"tokenizer.json", "tokenizer_config.json", "tokenizer.model", "special_tokens_map.json"})
      if (fs::exists(fs::path(ck.hf_dir) / f))
        fs::copy_file(fs::path(ck.hf_dir) / f, out / f, fs::copy_options::overwrite_existing);
    copied = true;
  }
  if (!copied) {
    write_json(out / "tokenizer.json", tok.to_hf_tokenizer_json());
    write_json(out / "tokenizer_config.json", tok.to_hf_tokenizer_config(ck.config.max_position_embeddings));
  }
  nlohmann::json gen = ck.generation_config.is_object() ? ck.generation_config : nlohmann::json::object();
  if (!gen.contains("bos_token_id") && tok.bos_id() >= 0) gen["bos_token_id"] = tok.bos_id();
  if (!gen.contains("eos_token_id") && tok.eos_id() >= 0) gen["eos_token_id"] = tok.eos_id();
  if (!gen.contains("pad_token_id") && tok.pad_id() >= 0) gen["pad_token_id"] = tok.pad_id();
  write_json(out / "generation_config.json", gen);
}

ConvertReport convert_checkpoint(const ConvertOptions& opts, const std::function<void(const std::string&)>& warn) {
  LLM_REQUIRE(fs::absolute(opts.input) != fs::absolute(opts.output)) << "input and output are the same path";
  // As quantize: an existing OUT is never overwritten; written as OUT.part, renamed when complete.
  PartialOutput partial(opts.output, "convert");
  const fs::path& out = partial.path();
  LoadOptions lo;
  lo.keep_quantized = false;  // convert writes dense tensors: quantized linears dequantized to f32
  Checkpoint ck = load_checkpoint(opts.input, lo);  // stored dtypes; converted below tensor by tensor
  ModelConfig cfg = ck.config;
  std::unique_ptr<Tokenizer> tok = load_tokenizer(ck);  // before writing anything: fail early

  // Tensors in name order; a tied lm_head is not written (transformers re-ties it).
  std::vector<std::pair<std::string, Tensor>> tensors;
  int64_t overflow = 0;
  DType out_dtype = DType::F32;
  for (auto& [name, t] : ck.tensors) {
    if (name == "lm_head.weight" && cfg.tie_word_embeddings) continue;
    const bool is_float = t.dtype == DType::F32 || t.dtype == DType::F16 || t.dtype == DType::BF16;
    Tensor w = t;
    if (is_float && opts.dtype && *opts.dtype != t.dtype) {
      if (*opts.dtype == DType::F16 && t.dtype != DType::F16) overflow += count_f16_overflow(t);
      w = convert_host(t, *opts.dtype);
    }
    if (name == "model.embed_tokens.weight") out_dtype = w.dtype;
    tensors.emplace_back(name, std::move(w));
  }
  if (opts.dtype == DType::F16 && ck.tensors.at("model.embed_tokens.weight").dtype == DType::BF16)
    warn("converting bf16 to f16: f16 holds values up to 65504 only" +
         std::string(overflow ? " and " + std::to_string(overflow) + " values overflow to inf" : "; none overflow here"));
  else if (overflow)
    warn(std::to_string(overflow) + " values exceed f16's range (65504) and become inf");

  const ShardedWrite written = write_sharded_safetensors(out.string(), tensors, opts.max_shard_bytes);

  cfg.torch_dtype = out_dtype == DType::BF16 ? "bfloat16" : out_dtype == DType::F16 ? "float16" : "float32";
  write_json(out / "config.json", cfg.to_hf_json());

  write_tokenizer_files(ck, *tok, out.string());
  partial.commit();

  ConvertReport r;
  r.num_tensors = tensors.size();
  r.num_shards = written.num_shards;
  r.total_bytes = written.total_bytes;
  return r;
}

}  // namespace llmctl
