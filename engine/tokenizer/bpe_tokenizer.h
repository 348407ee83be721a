// Byte-level BPE tokenizer (GPT-2 / Llama 3 / Qwen2 / SmolLM style), built from an HF
// tokenizer.json or from the vocabulary GGUF files store. encode: added tokens are cut out, the
// rest is pre-tokenized (PCRE2 regexes) and each piece BPE-merged; decode maps the byte-level
// pieces back to bytes, so decode(encode(x)) == x for any byte string x whose bytes all have a
// token. A byte the vocabulary lacks is dropped, as HF tokenizers does (SmolLM2 has no token for
// \x04 \x06 \x13 \x14 \x16 \x1d, nor for bytes that valid UTF-8 never or hardly uses: C0 C1 F1 F2 F5-FF).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/added_tokens.h"
#include "engine/tokenizer/bpe_model.h"
#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/tokenizer.h"

namespace llmctl {

class BpeTokenizer : public Tokenizer {
 public:
  // Everything a BpeTokenizer is made of, in plain data.
  struct Parts {
    std::vector<std::string> vocab;  // id -> entry as written (byte spelling); "" for a hole
    std::vector<std::pair<std::string, std::string>> merges;  // best rank first
    BpeModel::Options model;
    std::vector<AddedToken> added;
    PreTokenizer pre;
    nlohmann::json normalizer;  // null, or NFC (applied as identity: input is taken as NFC)
    int bos = -1, eos = -1, pad = -1;
    bool add_bos = false;
    std::string chat_template;
  };

  explicit BpeTokenizer(Parts parts);

  // tokenizer.json (+ optional tokenizer_config.json, which overrides bos/eos/pad/add_bos and
  // supplies chat_template). Every token id (vocab, added_tokens) must lie in [0, max_vocab):
  // the model's vocabulary size when known, else kMaxVocabSize (0). Throws InputError for what is
  // not byte-level BPE, and for ids, sizes or nesting out of bounds.
  static std::unique_ptr<BpeTokenizer> from_hf_json(const nlohmann::json& tokenizer_json,
                                                    const nlohmann::json& tokenizer_config = nullptr,
                                                    int max_vocab = 0);
  // GGUF tokenizer.ggml.* data (tokenizer.ggml.model "gpt2"). token_types: 1 normal, 2 unknown,
  // 3 control (special added token), 4 user-defined (added token), 5 unused, 6 byte.
  // pre_name is tokenizer.ggml.pre; ids < 0 mean absent.
  static std::unique_ptr<BpeTokenizer> from_gguf_vocab(
      const std::vector<std::string>& tokens, const std::vector<int>& token_types,
      const std::vector<std::string>& merges, const std::string& pre_name, int bos, int eos, int pad,
      bool add_bos, const std::string& chat_template);

  std::vector<int> encode(std::string_view text, bool parse_special = true) const override;
  std::string decode(const std::vector<int>& ids, bool skip_special = false) const override;
  std::string token_bytes(int id) const override;
  std::string token_text(int id) const override;
  int token_to_id(std::string_view piece) const override;
  int vocab_size() const override { return int(text_.size()); }
  bool is_special(int id) const override;

  nlohmann::json to_hf_tokenizer_json() const override;
  nlohmann::json to_hf_tokenizer_config(int64_t model_max_length = 0) const override;

  const PreTokenizer& pre_tokenizer() const { return pre_; }
  const AddedTokenMatcher& added_tokens() const { return added_; }
  const BpeModel& model() const { return *model_; }

 private:
  void check_id(int id) const;

  std::unique_ptr<BpeModel> model_;
  PreTokenizer pre_;
  AddedTokenMatcher added_;
  nlohmann::json normalizer_;
  std::vector<std::string> text_, bytes_;  // per id, added tokens' content taking precedence
  std::vector<uint8_t> special_;
};

}  // namespace llmctl
