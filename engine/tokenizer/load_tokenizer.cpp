// load_tokenizer: picks the tokenizer a checkpoint carries. Kept in its own file because it is
// the only tokenizer code that needs the checkpoint and GGUF readers.
#include <filesystem>
#include <fstream>

#include "engine/core/error.h"
#include "engine/model/checkpoint.h"
#include "engine/model/gguf.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/sentencepiece_proto.h"
#include "engine/tokenizer/sentencepiece_tokenizer.h"

namespace llmctl {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

json read_json(const fs::path& p) {
  std::ifstream f(p);
  LLM_REQUIRE(f) << "cannot open " << p.string();
  try {
    return json::parse(f);
  } catch (const json::exception& e) {
    LLM_THROW() << p.string() << ": invalid JSON: " << e.what();
  }
}

std::unique_ptr<Tokenizer> from_hf_dir(const std::string& dir) {
  fs::path d(dir);
  json cfg;
  if (fs::exists(d / "tokenizer_config.json")) cfg = read_json(d / "tokenizer_config.json");
  if (fs::exists(d / "tokenizer.json")) {
    json tj = read_json(d / "tokenizer.json");
    // A non-byte-level tokenizer.json (Llama 2 style) next to a tokenizer.model: use the latter.
    bool byte_level = tj.contains("decoder") && tj["decoder"].is_object() &&
                      tj["decoder"].value("type", "") == "ByteLevel";
    if (byte_level || !fs::exists(d / "tokenizer.model")) return BpeTokenizer::from_hf_json(tj, cfg);
  }
  if (fs::exists(d / "tokenizer.model"))
    return SentencePieceTokenizer::from_file((d / "tokenizer.model").string(), cfg);
  LLM_THROW() << dir << ": no tokenizer.json or tokenizer.model";
}

std::vector<std::string> string_array(const GgufFile& g, const std::string& key) {
  std::vector<std::string> out;
  if (const GgufValue* v = g.find(key)) {
    const auto& arr = v->as_array();
    out.reserve(arr.size());
    for (const auto& e : arr) out.push_back(e.as_string());
  }
  return out;
}

int int_or(const GgufFile& g, const std::string& key, int dflt) {
  const GgufValue* v = g.find(key);
  return v ? int(v->as_int()) : dflt;
}

std::unique_ptr<Tokenizer> from_gguf(const GgufFile& g) {
  std::string model = g.at("tokenizer.ggml.model").as_string();
  std::vector<std::string> tokens = string_array(g, "tokenizer.ggml.tokens");
  std::vector<int> types;
  if (const GgufValue* v = g.find("tokenizer.ggml.token_type"))
    for (const auto& e : v->as_array()) types.push_back(int(e.as_int()));
  const GgufValue* add_bos = g.find("tokenizer.ggml.add_bos_token");
  const GgufValue* tmpl = g.find("tokenizer.chat_template");
  if (model == "llama") {  // SentencePiece BPE (Llama 2, TinyLlama, Mistral)
    SentencePieceVocab v;
    v.tokens = std::move(tokens);
    v.types = std::move(types);
    if (const GgufValue* s = g.find("tokenizer.ggml.scores"))
      for (const auto& e : s->as_array()) v.scores.push_back(float(e.as_float()));
    v.unk = int_or(g, "tokenizer.ggml.unknown_token_id", 0);
    v.bos = int_or(g, "tokenizer.ggml.bos_token_id", 1);
    v.eos = int_or(g, "tokenizer.ggml.eos_token_id", 2);
    v.pad = int_or(g, "tokenizer.ggml.padding_token_id", -1);
    if (const GgufValue* sp = g.find("tokenizer.ggml.add_space_prefix")) v.add_space_prefix = sp->as_bool();
    json cfg = json::object();
    if (add_bos) cfg["add_bos_token"] = add_bos->as_bool();
    if (tmpl) cfg["chat_template"] = tmpl->as_string();
    return SentencePieceTokenizer::from_serialized(sentencepiece_model_proto(v), cfg);
  }
  if (model != "gpt2")
    LLM_THROW() << g.path() << ": GGUF tokenizer model '" << model
                << "' is not supported (byte-level BPE 'gpt2' and SentencePiece 'llama' are)";
  std::vector<std::string> merges = string_array(g, "tokenizer.ggml.merges");
  const GgufValue* pre = g.find("tokenizer.ggml.pre");
  return BpeTokenizer::from_gguf_vocab(tokens, types, merges, pre ? pre->as_string() : "default",
                                       int_or(g, "tokenizer.ggml.bos_token_id", -1),
                                       int_or(g, "tokenizer.ggml.eos_token_id", -1),
                                       int_or(g, "tokenizer.ggml.padding_token_id", -1),
                                       add_bos ? add_bos->as_bool() : false, tmpl ? tmpl->as_string() : "");
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const Checkpoint& ckpt) {
  if (ckpt.gguf) return from_gguf(*ckpt.gguf);
  LLM_REQUIRE(!ckpt.hf_dir.empty()) << ckpt.source_path << ": the checkpoint has no tokenizer source";
  return from_hf_dir(ckpt.hf_dir);
}

}  // namespace llmctl
