// SentencePiece .model files (Llama 2, TinyLlama, Mistral) through libsentencepiece, behind the
// Tokenizer interface. Control tokens written in the text ("<s>") are cut out first when
// parse_special is set; the rest goes to SentencePiece as is.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/tokenizer/added_tokens.h"
#include "engine/tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace llmctl {

class SentencePieceTokenizer : public Tokenizer {
 public:
  // tokenizer_config (may be null) overrides bos/eos/pad, add_bos_token and gives chat_template.
  static std::unique_ptr<SentencePieceTokenizer> from_file(const std::string& path,
                                                           const nlohmann::json& tokenizer_config = nullptr);
  static std::unique_ptr<SentencePieceTokenizer> from_serialized(const std::string& model_proto,
                                                                 const nlohmann::json& tokenizer_config = nullptr);
  ~SentencePieceTokenizer() override;

  std::vector<int> encode(std::string_view text, bool parse_special = true) const override;
  std::string decode(const std::vector<int>& ids, bool skip_special = false) const override;
  std::string token_bytes(int id) const override;
  std::string token_text(int id) const override;
  int token_to_id(std::string_view piece) const override;
  int vocab_size() const override;
  bool is_special(int id) const override;
  // Throws InputError: SentencePiece models are copied as tokenizer.model instead.
  nlohmann::json to_hf_tokenizer_json() const override;

 private:
  SentencePieceTokenizer();
  void init(const nlohmann::json& cfg);
  void check_id(int id) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  AddedTokenMatcher control_;
};

}  // namespace llmctl
