#include "engine/tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <deque>

#include "engine/core/error.h"
#include "engine/model/config.h"
#include "engine/tokenizer/byte_unicode.h"

namespace llmctl {

BpeTokenizer::BpeTokenizer(Parts p) : pre_(std::move(p.pre)), normalizer_(std::move(p.normalizer)) {
  LLM_REQUIRE(pre_.byte_level()) << "only byte-level BPE is supported (the pre-tokenizer must end "
                                    "with ByteLevel)";
  if (!normalizer_.is_null()) {
    std::string type = normalizer_.value("type", "");
    LLM_REQUIRE(type == "NFC" || (type == "Sequence" && normalizer_.value("normalizers", nlohmann::json::array()).empty()))
        << "normalizer '" << type << "' is not supported (null or NFC only)";
  }
  // Ids are bounded before the id-indexed tables grow to them.
  LLM_REQUIRE(p.vocab.size() <= size_t(kMaxVocabSize))
      << "the vocabulary has " << p.vocab.size() << " entries, more than llmctl's limit of " << kMaxVocabSize;
  int n = int(p.vocab.size());
  for (const auto& t : p.added) {
    LLM_REQUIRE(t.id >= 0 && t.id < kMaxVocabSize)
        << "added token '" << t.content << "' has id " << t.id << ", outside [0, " << kMaxVocabSize << ")";
    n = std::max(n, t.id + 1);
  }
  p.vocab.resize(n);
  for (const auto& t : p.added)
    if (p.vocab[t.id].empty()) p.vocab[t.id] = t.content;
  model_ = std::make_unique<BpeModel>(std::move(p.vocab), p.merges, p.model);
  text_.resize(n);
  bytes_.resize(n);
  special_.assign(n, 0);
  for (int id = 0; id < n; ++id) {
    text_[id] = model_->text(id);
    bytes_[id] = model_->bytes(id);
  }
  // Added tokens decode from their content, by the ByteLevel decoder's rule: byte spelling
  // undone when every character is in the byte alphabet, else the UTF-8 as is.
  for (const auto& t : p.added) {
    text_[t.id] = t.content;
    if (!unicode_text_to_bytes(t.content, bytes_[t.id])) bytes_[t.id] = t.content;
    special_[t.id] = t.special;
  }
  added_ = AddedTokenMatcher(std::move(p.added));
  for (int id : {p.bos, p.eos, p.pad})
    LLM_REQUIRE(id >= -1 && id < n) << "special token id " << id << " is outside the vocabulary (" << n << ")";
  bos_id_ = p.bos;
  eos_id_ = p.eos;
  pad_id_ = p.pad;
  add_bos_ = p.add_bos && p.bos >= 0;
  set_chat_template(std::move(p.chat_template));
}

std::unique_ptr<BpeTokenizer> BpeTokenizer::from_gguf_vocab(
    const std::vector<std::string>& tokens, const std::vector<int>& token_types,
    const std::vector<std::string>& merges, const std::string& pre_name, int bos, int eos, int pad,
    bool add_bos, const std::string& chat_template) {
  LLM_REQUIRE(!tokens.empty()) << "GGUF: tokenizer.ggml.tokens is empty";
  LLM_REQUIRE(tokens.size() <= size_t(kMaxVocabSize))
      << "GGUF: tokenizer.ggml.tokens has " << tokens.size() << " entries, more than llmctl's limit of " << kMaxVocabSize;
  LLM_REQUIRE(token_types.empty() || token_types.size() == tokens.size())
      << "GGUF: tokenizer.ggml.token_type has " << token_types.size() << " entries for "
      << tokens.size() << " tokens";
  Parts p;
  p.vocab = tokens;
  p.pre = PreTokenizer::for_gguf(pre_name);
  // llama.cpp (and Llama 3's tokenizer.json) look a whole piece up before merging.
  p.model.ignore_merges = pre_name == "llama-bpe" || pre_name == "llama3" || pre_name == "llama-v3";
  p.model.strict_merges = false;  // like llama.cpp, merges naming unknown tokens are skipped
  p.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& m = merges[i];
    size_t sp = m.find(' ', 1);
    LLM_REQUIRE(sp != std::string::npos && sp + 1 < m.size())
        << "GGUF: tokenizer.ggml.merges[" << i << "] '" << m << "' is not 'left right'";
    p.merges.emplace_back(m.substr(0, sp), m.substr(sp + 1));
  }
  for (size_t id = 0; id < token_types.size(); ++id) {
    int type = token_types[id];
    if (type != 3 && type != 4) continue;
    AddedToken t;
    t.id = int(id);
    t.content = tokens[id];
    t.special = type == 3;
    t.normalized = false;  // matched in the raw text, as llama.cpp does
    if (!t.content.empty()) p.added.push_back(std::move(t));
  }
  p.bos = bos;
  p.eos = eos;
  p.pad = pad;
  p.add_bos = add_bos;
  p.chat_template = chat_template;
  return std::make_unique<BpeTokenizer>(std::move(p));
}

std::vector<int> BpeTokenizer::encode(std::string_view text, bool parse_special) const {
  std::vector<int> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<TextSegment> segs;
  added_.split(text, parse_special, segs);
  std::vector<std::string_view> pieces;
  std::deque<std::string> arena;
  for (const auto& seg : segs) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    pieces.clear();
    arena.clear();
    pre_.split(seg.text, pieces, arena);
    for (auto piece : pieces) model_->encode_word(piece, ids);
  }
  return ids;
}

void BpeTokenizer::check_id(int id) const {
  LLM_REQUIRE(id >= 0 && id < int(text_.size()))
      << "token id " << id << " is outside the vocabulary (" << text_.size() << ")";
}

std::string BpeTokenizer::decode(const std::vector<int>& ids, bool skip_special) const {
  std::string out;
  for (int id : ids) {
    check_id(id);
    if (skip_special && special_[id]) continue;
    out += bytes_[id];
  }
  return out;
}

std::string BpeTokenizer::token_bytes(int id) const {
  check_id(id);
  return bytes_[id];
}

std::string BpeTokenizer::token_text(int id) const {
  check_id(id);
  return text_[id];
}

int BpeTokenizer::token_to_id(std::string_view piece) const {
  for (const auto& t : added_.tokens())
    if (t.content == piece) return t.id;
  return model_->text_to_id(piece);
}

bool BpeTokenizer::is_special(int id) const { return id >= 0 && id < int(special_.size()) && special_[id]; }

}  // namespace llmctl
