#include "engine/tokenizer/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include "engine/core/error.h"

namespace llmctl {
namespace {

std::string config_token(const nlohmann::json& cfg, const char* key) {
  if (!cfg.is_object() || !cfg.contains(key)) return {};
  const auto& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return {};
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer() : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::from_file(const std::string& path,
                                                                          const nlohmann::json& cfg) {
  std::unique_ptr<SentencePieceTokenizer> t(new SentencePieceTokenizer());
  auto st = t->sp_->Load(path);
  LLM_REQUIRE(st.ok()) << "cannot load SentencePiece model " << path << ": " << st.ToString();
  t->init(cfg);
  return t;
}

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::from_serialized(const std::string& proto,
                                                                                const nlohmann::json& cfg) {
  std::unique_ptr<SentencePieceTokenizer> t(new SentencePieceTokenizer());
  auto st = t->sp_->LoadFromSerializedProto(proto);
  LLM_REQUIRE(st.ok()) << "cannot load SentencePiece model: " << st.ToString();
  t->init(cfg);
  return t;
}

void SentencePieceTokenizer::init(const nlohmann::json& cfg) {
  bos_id_ = sp_->bos_id();
  eos_id_ = sp_->eos_id();
  pad_id_ = sp_->pad_id();
  add_bos_ = bos_id_ >= 0;  // SentencePiece models (Llama 2) expect BOS unless told otherwise
  auto id_of = [&](const char* key, int& id) {
    std::string s = config_token(cfg, key);
    if (!s.empty() && sp_->PieceToId(s) != sp_->unk_id()) id = sp_->PieceToId(s);
  };
  id_of("bos_token", bos_id_);
  id_of("eos_token", eos_id_);
  id_of("pad_token", pad_id_);
  if (cfg.is_object() && cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean())
    add_bos_ = cfg["add_bos_token"].get<bool>() && bos_id_ >= 0;
  if (cfg.is_object() && cfg.contains("chat_template") && cfg["chat_template"].is_string())
    set_chat_template(cfg["chat_template"].get<std::string>());
  std::vector<AddedToken> control;
  for (int id = 0; id < sp_->GetPieceSize(); ++id) {
    if (!sp_->IsControl(id) || sp_->IdToPiece(id).empty()) continue;
    AddedToken t;
    t.id = id;
    t.content = sp_->IdToPiece(id);
    t.special = true;
    control.push_back(std::move(t));
  }
  control_ = AddedTokenMatcher(std::move(control));
}

std::vector<int> SentencePieceTokenizer::encode(std::string_view text, bool parse_special) const {
  std::vector<int> ids;
  std::vector<TextSegment> segs;
  control_.split(text, parse_special, segs);
  for (const auto& s : segs) {
    if (s.id >= 0) {
      ids.push_back(s.id);
      continue;
    }
    std::vector<int> part;
    auto st = sp_->Encode(std::string(s.text), &part);
    LLM_CHECK(st.ok()) << "SentencePiece encode failed: " << st.ToString();
    ids.insert(ids.end(), part.begin(), part.end());
  }
  return ids;
}

void SentencePieceTokenizer::check_id(int id) const {
  LLM_REQUIRE(id >= 0 && id < sp_->GetPieceSize())
      << "token id " << id << " is outside the vocabulary (" << sp_->GetPieceSize() << ")";
}

std::string SentencePieceTokenizer::decode(const std::vector<int>& ids, bool skip_special) const {
  // Runs of ordinary pieces go through SentencePiece (which joins byte pieces and drops the
  // leading space of the text); control tokens are written as their piece unless skipped.
  std::string out;
  std::vector<int> run;
  auto flush = [&] {
    if (run.empty()) return;
    std::string s;
    auto st = sp_->Decode(run, &s);
    LLM_CHECK(st.ok()) << "SentencePiece decode failed: " << st.ToString();
    out += s;
    run.clear();
  };
  for (int id : ids) {
    check_id(id);
    if (sp_->IsControl(id)) {
      flush();
      if (!skip_special) out += sp_->IdToPiece(id);
    } else {
      run.push_back(id);
    }
  }
  flush();
  return out;
}

std::string SentencePieceTokenizer::token_bytes(int id) const {
  check_id(id);
  const std::string& p = sp_->IdToPiece(id);
  if (sp_->IsByte(id) && p.size() == 6) return std::string(1, char(std::stoi(p.substr(3, 2), nullptr, 16)));
  if (sp_->IsUnknown(id)) return " \xE2\x81\x87 ";  // what SentencePiece prints for <unk>
  std::string out;
  for (size_t i = 0; i < p.size(); ++i) {  // U+2581 (lower one eighth block) stands for a space
    if (p.compare(i, 3, "\xE2\x96\x81") == 0) {
      out += ' ';
      i += 2;
    } else {
      out += p[i];
    }
  }
  return out;
}

std::string SentencePieceTokenizer::token_text(int id) const {
  check_id(id);
  return sp_->IdToPiece(id);
}

int SentencePieceTokenizer::token_to_id(std::string_view piece) const {
  int id = sp_->PieceToId(std::string(piece));
  if (id == sp_->unk_id() && piece != sp_->IdToPiece(id)) return -1;
  return id;
}

int SentencePieceTokenizer::vocab_size() const { return sp_->GetPieceSize(); }

bool SentencePieceTokenizer::is_special(int id) const {
  return id >= 0 && id < sp_->GetPieceSize() && (sp_->IsControl(id) || sp_->IsUnknown(id));
}

nlohmann::json SentencePieceTokenizer::to_hf_tokenizer_json() const {
  LLM_THROW() << "writing tokenizer.json from a SentencePiece model is not supported "
                 "(copy tokenizer.model instead)";
}

}  // namespace llmctl
