// A tokenizer for unit tests that need one without a model file: token i < 256 is byte i; then
// three ChatML specials. encode() maps the specials written in the text (with parse_special) and
// every other byte to its own token, so the expected ids of any text are easy to write down.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/error.h"
#include "engine/tokenizer/tokenizer.h"

namespace llmctl::test {

class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr int kEndOfText = 256, kImStart = 257, kImEnd = 258, kVocab = 259;

  ByteTokenizer() {
    eos_id_ = kImEnd;
    bos_id_ = pad_id_ = kEndOfText;
    set_chat_template(
        "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
        "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}");
  }

  std::vector<int> encode(std::string_view text, bool parse_special = true) const override {
    std::vector<int> ids;
    for (size_t i = 0; i < text.size();) {
      bool special = false;
      for (int id = kEndOfText; parse_special && id < kVocab; ++id)
        if (text.substr(i).starts_with(token_text(id))) {
          ids.push_back(id);
          i += token_text(id).size();
          special = true;
          break;
        }
      if (!special) ids.push_back(static_cast<unsigned char>(text[i++]));
    }
    return ids;
  }
  std::string decode(const std::vector<int>& ids, bool skip_special = false) const override {
    std::string s;
    for (int id : ids)
      if (!(skip_special && is_special(id))) s += token_bytes(id);
    return s;
  }
  std::string token_bytes(int id) const override { return id < 256 ? std::string(1, char(id)) : token_text(id); }
  std::string token_text(int id) const override {
    LLM_REQUIRE(id >= 0 && id < kVocab) << "token id " << id << " is outside the vocabulary";
    static const char* const special[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    return id < 256 ? std::string(1, char(id)) : special[id - 256];
  }
  int token_to_id(std::string_view piece) const override {
    for (int id = 0; id < kVocab; ++id)
      if (token_text(id) == piece) return id;
    return -1;
  }
  int vocab_size() const override { return kVocab; }
  bool is_special(int id) const override { return id >= 256; }
  nlohmann::json to_hf_tokenizer_json() const override { return nullptr; }

  // The ids of `text` with no specials parsed (bytes only).
  static std::vector<int> bytes(std::string_view text) {
    std::vector<int> ids;
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }
};

}  // namespace llmctl::test
