// BpeTokenizer <-> HF tokenizers' tokenizer.json, and the tokenizer_config.json that goes with it.
#include <algorithm>
#include <string>

#include "engine/core/error.h"
#include "engine/model/config.h"
#include "engine/tokenizer/bpe_tokenizer.h"

namespace llmctl {
namespace {

using json = nlohmann::json;

// A token in tokenizer_config.json is a string or a serialized AddedToken ({"content": ...}).
std::string config_token(const json& cfg, const char* key) {
  if (!cfg.is_object() || !cfg.contains(key)) return {};
  const json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return {};
}

// Nesting of Sequence post-processors walked (real files nest one level).
constexpr int kMaxSequenceDepth = 16;

// The BOS a TemplateProcessing post-processor puts first in "single", if any.
std::string template_bos(const json& pp, int depth = 0) {
  if (!pp.is_object()) return {};
  std::string type = pp.value("type", "");
  if (type == "Sequence") {
    LLM_REQUIRE(depth < kMaxSequenceDepth)
        << "tokenizer.json: post_processor Sequences nest deeper than " << kMaxSequenceDepth << " levels";
    for (const auto& sub : pp.value("processors", json::array()))
      if (auto b = template_bos(sub, depth + 1); !b.empty()) return b;
    return {};
  }
  if (type != "TemplateProcessing") return {};
  const json& single = pp.value("single", json::array());
  if (single.empty() || !single[0].contains("SpecialToken")) return {};
  std::string name = single[0]["SpecialToken"].value("id", "");
  // special_tokens maps the template name to the real token(s).
  if (pp.contains("special_tokens") && pp["special_tokens"].contains(name)) {
    const json& toks = pp["special_tokens"][name].value("tokens", json::array());
    if (toks.size() == 1) return toks[0].get<std::string>();
  }
  return name;
}

std::string chat_template_of(const json& cfg) {
  if (!cfg.is_object() || !cfg.contains("chat_template")) return {};
  const json& t = cfg["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array()) {  // [{"name": "default", "template": ...}, ...]
    for (const auto& e : t)
      if (e.value("name", "") == "default") return e.value("template", "");
    if (!t.empty()) return t[0].value("template", "");
  }
  return {};
}

// A token id from the file: an integer in [0, bound).
int token_id(const json& v, const std::string& what, int bound, const char* bound_name) {
  LLM_REQUIRE(v.is_number_integer()) << "tokenizer.json: " << what << " has id " << v.dump() << ", not an integer";
  const int64_t id = v.get<int64_t>();
  LLM_REQUIRE(id >= 0 && id < bound) << "tokenizer.json: " << what << " has id " << id << ", outside " << bound_name
                                     << " [0, " << bound << ")";
  return int(id);
}

std::unique_ptr<BpeTokenizer> parse_hf_json(const json& tj, const json& cfg, int max_vocab);

}  // namespace

std::unique_ptr<BpeTokenizer> BpeTokenizer::from_hf_json(const json& tj, const json& cfg, int max_vocab) {
  try {
    return parse_hf_json(tj, cfg, max_vocab);
  } catch (const json::exception& e) {  // a field of the wrong type: still bad input, with its reason
    LLM_THROW() << "tokenizer.json: " << e.what();
  }
}

namespace {

std::unique_ptr<BpeTokenizer> parse_hf_json(const json& tj, const json& cfg, int max_vocab) {
  using Parts = BpeTokenizer::Parts;
  const int bound = max_vocab > 0 ? std::min(max_vocab, kMaxVocabSize) : kMaxVocabSize;
  const char* bound_name = max_vocab > 0 ? "the model's vocabulary" : "the largest vocabulary llmctl accepts";
  LLM_REQUIRE(tj.is_object() && tj.contains("model")) << "tokenizer.json: no \"model\"";
  const json& m = tj["model"];
  std::string type = m.value("type", m.contains("merges") ? "BPE" : "");
  LLM_REQUIRE(type == "BPE") << "tokenizer.json: model type '" << type
                             << "' is not supported (byte-level BPE only; use tokenizer.model for SentencePiece)";
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    LLM_REQUIRE(!m.contains(k) || m[k].is_null() || m[k] == "")
        << "tokenizer.json: BPE option '" << k << "' is not supported";

  Parts p;
  const json& vocab = m.at("vocab");
  LLM_REQUIRE(vocab.is_object()) << "tokenizer.json: model.vocab is not an object";
  LLM_REQUIRE(vocab.size() <= size_t(bound)) << "tokenizer.json: model.vocab has " << vocab.size() << " entries, more than "
                                             << bound_name << " (" << bound << ")";
  // Ids are checked before the id-indexed table grows to them.
  for (const auto& [text, id] : vocab.items()) {
    int i = token_id(id, "vocabulary entry '" + text + "'", bound, bound_name);
    if (i >= int(p.vocab.size())) p.vocab.resize(size_t(i) + 1);
    p.vocab[size_t(i)] = text;
  }
  const json& merges = m.value("merges", json::array());
  p.merges.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const json& e = merges[r];
    if (e.is_array() && e.size() == 2) {
      p.merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
    } else if (e.is_string()) {
      const std::string& s = e.get_ref<const std::string&>();
      size_t sp = s.find(' ');
      LLM_REQUIRE(sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos)
          << "tokenizer.json: merge " << r << " '" << s << "' is not 'left right'";
      p.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else {
      LLM_THROW() << "tokenizer.json: merge " << r << " is neither \"a b\" nor [a, b]";
    }
  }
  p.model.ignore_merges = m.value("ignore_merges", false);
  p.model.strict_merges = true;
  if (m.contains("unk_token") && m["unk_token"].is_string()) {
    auto it = vocab.find(m["unk_token"].get<std::string>());
    if (it != vocab.end()) p.model.unk_id = it->get<int>();  // checked above
  }
  const json& added = tj.value("added_tokens", json::array());
  LLM_REQUIRE(added.is_array() && added.size() <= size_t(bound))
      << "tokenizer.json: added_tokens must be a list of at most " << bound << " tokens";
  for (const auto& a : added) {
    LLM_REQUIRE(a.is_object() && a.contains("id")) << "tokenizer.json: an added token has no id: " << a.dump();
    token_id(a["id"], "added token " + a.value("content", std::string("?")), bound, bound_name);
    p.added.push_back(AddedToken::from_hf_json(a));
  }
  p.pre = PreTokenizer::from_hf_json(tj.value("pre_tokenizer", json()));
  p.normalizer = tj.value("normalizer", json());
  auto tok_id = [&](const std::string& s) -> int {
    if (s.empty()) return -1;
    for (const auto& a : p.added)
      if (a.content == s) return a.id;
    for (size_t i = 0; i < p.vocab.size(); ++i)
      if (p.vocab[i] == s) return int(i);
    return -1;
  };

  std::string bos = template_bos(tj.value("post_processor", json()));
  p.add_bos = !bos.empty();
  if (auto b = config_token(cfg, "bos_token"); !b.empty()) bos = b;
  p.bos = tok_id(bos);
  p.eos = tok_id(config_token(cfg, "eos_token"));
  p.pad = tok_id(config_token(cfg, "pad_token"));
  if (cfg.is_object() && cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean())
    p.add_bos = cfg["add_bos_token"].get<bool>();
  p.chat_template = chat_template_of(cfg);
  return std::make_unique<BpeTokenizer>(std::move(p));
}

}  // namespace

json BpeTokenizer::to_hf_tokenizer_json() const {
  json vocab = json::object();
  for (int id = 0; id < model_->size(); ++id) {
    const std::string& t = model_->text(id);
    if (!t.empty() && !vocab.contains(t)) vocab[t] = id;
  }
  json merges = json::array();
  for (auto [a, b] : model_->merges()) merges.push_back(json::array({model_->text(a), model_->text(b)}));
  json added = json::array();
  for (const auto& t : added_.tokens()) added.push_back(t.to_hf_json());

  json post;
  if (add_bos_ && bos_id_ >= 0) {
    std::string b = text_[bos_id_];
    auto special = [&](int type_id) { return json{{"SpecialToken", {{"id", b}, {"type_id", type_id}}}}; };
    auto seq = [&](const char* id, int type_id) { return json{{"Sequence", {{"id", id}, {"type_id", type_id}}}}; };
    post = {{"type", "TemplateProcessing"},
            {"single", {special(0), seq("A", 0)}},
            {"pair", {special(0), seq("A", 0), special(1), seq("B", 1)}},
            {"special_tokens", {{b, {{"id", b}, {"ids", json::array({bos_id_})}, {"tokens", json::array({b})}}}}}};
  } else {
    post = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}};
  }
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", normalizer_},
      {"pre_tokenizer", pre_.to_hf_json()},
      {"post_processor", post},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", model_->options().unk_id >= 0 ? json(model_->text(model_->options().unk_id)) : json()},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", model_->options().ignore_merges},
        {"vocab", vocab},
        {"merges", merges}}},
  };
}

json BpeTokenizer::to_hf_tokenizer_config(int64_t model_max_length) const {
  json cfg = Tokenizer::to_hf_tokenizer_config(model_max_length);
  json decoder = json::object();
  for (const auto& t : added_.tokens()) {
    json e = t.to_hf_json();
    e.erase("id");
    decoder[std::to_string(t.id)] = e;
  }
  cfg["added_tokens_decoder"] = decoder;
  // Not "GPT2Tokenizer": transformers 5 rebuilds that class's pipeline with a plain ByteLevel
  // pre-tokenizer and drops what tokenizer.json says (SmolLM2's digit splitting, Llama 3's and
  // Qwen2's regexes). PreTrainedTokenizerFast uses tokenizer.json as written (4.x and 5.x).
  cfg["tokenizer_class"] = "PreTrainedTokenizerFast";
  return cfg;
}

}  // namespace llmctl
