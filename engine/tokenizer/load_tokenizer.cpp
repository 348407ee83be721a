// load_tokenizer: picks the tokenizer a checkpoint carries. Kept in its own file because it is
// the only tokenizer code that needs the checkpoint and GGUF readers.
#include <filesystem>
#include <iostream>

#include "engine/core/error.h"
#include "engine/core/json_bounded.h"
#include "engine/model/checkpoint.h"
#include "engine/model/gguf.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/sentencepiece_proto.h"
#include "engine/tokenizer/sentencepiece_tokenizer.h"

namespace llmctl {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Size- and depth-bounded: a tokenizer.json nested 100k levels deep is refused while parsing.
json read_json(const fs::path& p) { return read_json_file_bounded(p.string(), kModelJsonLimits); }

std::unique_ptr<Tokenizer> from_hf_dir(const std::string& dir, int model_vocab) {
  fs::path d(dir);
  json cfg;
  if (fs::exists(d / "tokenizer_config.json")) cfg = read_json(d / "tokenizer_config.json");
  if (fs::exists(d / "tokenizer.json")) {
    json tj = read_json(d / "tokenizer.json");
    // A non-byte-level tokenizer.json (Llama 2 style) next to a tokenizer.model: use the latter.
    bool byte_level = tj.is_object() && tj.contains("decoder") && tj["decoder"].is_object() &&
                      tj["decoder"].value("type", "") == "ByteLevel";
    if (byte_level || !fs::exists(d / "tokenizer.model"))
      return BpeTokenizer::from_hf_json(tj, cfg, model_vocab);
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

// A token id from the metadata: dflt when absent, else in [0, n) (n: the number of tokens).
// An absent padding id may be written as -1 by some converters: accepted as absent.
int id_or(const GgufFile& g, const std::string& key, int dflt, size_t n) {
  const GgufValue* v = g.find(key);
  if (!v) return dflt;
  const int64_t id = v->as_int();
  if (id == -1 && key == "tokenizer.ggml.padding_token_id") return -1;
  LLM_REQUIRE(id >= 0 && uint64_t(id) < n)
      << g.path() << ": " << key << " = " << id << " is outside the vocabulary of " << n << " tokens";
  return int(id);
}

std::unique_ptr<Tokenizer> from_gguf(const GgufFile& g, int model_vocab) {
  std::string model = g.at("tokenizer.ggml.model").as_string();
  std::vector<std::string> tokens = string_array(g, "tokenizer.ggml.tokens");
  LLM_REQUIRE(tokens.size() <= size_t(model_vocab))
      << g.path() << ": the tokenizer has " << tokens.size() << " tokens but the model's vocabulary has " << model_vocab
      << " (token_embd.weight rows): tokenizer and model do not belong together";
  const size_t n = tokens.size();
  auto int_or = [&](const std::string& key, int dflt) { return id_or(g, key, dflt, n); };
  std::vector<int> types;
  if (const GgufValue* v = g.find("tokenizer.ggml.token_type")) {
    LLM_REQUIRE(v->as_array().size() == n) << g.path() << ": tokenizer.ggml.token_type has " << v->as_array().size()
                                           << " entries for " << n << " tokens";
    for (const auto& e : v->as_array()) {
      const int64_t t = e.as_int();
      types.push_back(t >= 0 && t <= 6 ? int(t) : 1);  // unknown types read as normal, as llama.cpp does
    }
  }
  const GgufValue* add_bos = g.find("tokenizer.ggml.add_bos_token");
  const GgufValue* tmpl = g.find("tokenizer.chat_template");
  if (model == "llama") {  // SentencePiece BPE (Llama 2, TinyLlama, Mistral)
    SentencePieceVocab v;
    v.tokens = std::move(tokens);
    v.types = std::move(types);
    if (const GgufValue* s = g.find("tokenizer.ggml.scores"))
      for (const auto& e : s->as_array()) v.scores.push_back(float(e.as_float()));
    v.unk = int_or("tokenizer.ggml.unknown_token_id", 0);
    v.bos = int_or("tokenizer.ggml.bos_token_id", 1);
    v.eos = int_or("tokenizer.ggml.eos_token_id", 2);
    v.pad = int_or("tokenizer.ggml.padding_token_id", -1);
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
                                       int_or("tokenizer.ggml.bos_token_id", -1),
                                       int_or("tokenizer.ggml.eos_token_id", -1),
                                       int_or("tokenizer.ggml.padding_token_id", -1),
                                       add_bos ? add_bos->as_bool() : false, tmpl ? tmpl->as_string() : "");
}

// The tokenizer against the model's vocabulary (embedding / lm_head rows): a tokenizer with more
// tokens than the model has rows is refused (its extra ids have no embedding); a model with more
// rows than the tokenizer has tokens (embeddings padded to a multiple of 64 or 128, as Qwen2's
// are) is the common case: the extra ids are masked out of sampling by the engine.
void reconcile_vocab(const Checkpoint& ckpt, const Tokenizer& tok) {
  const int model = ckpt.config.vocab_size, t = tok.vocab_size();
  LLM_REQUIRE(t <= model) << ckpt.source_path << ": the tokenizer has " << t << " tokens but the model's vocabulary has "
                          << model << " (embedding rows, vocab_size): ids " << model << ".." << t - 1
                          << " would have no embedding; the tokenizer does not belong to this model";
  if (t < model)
    std::cerr << "llmctl: note: the model's vocabulary has " << model << " ids and its tokenizer " << t << ": ids " << t
              << ".." << model - 1 << " (padding) are never sampled\n";
}

}  // namespace

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const GgufFile& g) { return from_gguf(g, kMaxVocabSize); }

std::unique_ptr<Tokenizer> load_tokenizer(const Checkpoint& ckpt) {
  const int model_vocab = ckpt.config.vocab_size;
  LLM_REQUIRE(model_vocab > 0 && model_vocab <= kMaxVocabSize)
      << ckpt.source_path << ": vocab_size " << model_vocab << " is out of range";
  std::unique_ptr<Tokenizer> tok;
  if (ckpt.gguf) {
    tok = from_gguf(*ckpt.gguf, model_vocab);
  } else {
    LLM_REQUIRE(!ckpt.hf_dir.empty()) << ckpt.source_path << ": the checkpoint has no tokenizer source";
    tok = from_hf_dir(ckpt.hf_dir, model_vocab);
  }
  reconcile_vocab(ckpt, *tok);
  return tok;
}

}  // namespace llmctl
