// Tokenizer interface: byte-level BPE (tokenizer.json or GGUF vocab/merges) and SentencePiece
// (.model) behind one API. encode() never adds BOS by itself: callers ask with add_bos().
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace llmctl {

struct Checkpoint;
class ChatTemplate;
class GgufFile;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Text -> ids. With parse_special, added/special tokens written in the text ("<|im_start|>")
  // become their ids; without, they are encoded as plain text.
  virtual std::vector<int> encode(std::string_view text, bool parse_special = true) const = 0;
  // Ids -> text. Byte-level pieces that do not form complete UTF-8 are kept as bytes; callers
  // that stream use token_bytes() and hold back incomplete code points themselves.
  virtual std::string decode(const std::vector<int>& ids, bool skip_special = false) const = 0;
  // The raw bytes a token stands for (what decode would append for it).
  virtual std::string token_bytes(int id) const = 0;
  virtual std::string token_text(int id) const = 0;  // the vocabulary entry as written
  virtual int token_to_id(std::string_view piece) const = 0;  // -1 when absent
  virtual int vocab_size() const = 0;
  virtual bool is_special(int id) const = 0;

  int bos_id() const { return bos_id_; }
  int eos_id() const { return eos_id_; }
  int pad_id() const { return pad_id_; }
  bool add_bos() const { return add_bos_; }
  const std::string& chat_template() const { return chat_template_; }  // the source, as loaded
  // The template compiled at load. Throws InputError when the model has none, or when its
  // template does not parse: the syntax error found (and printed as a warning) at load.
  const ChatTemplate& compiled_chat_template() const;

  // tokenizer.json (HF tokenizers format) equivalent to this tokenizer, for `convert`.
  virtual nlohmann::json to_hf_tokenizer_json() const = 0;
  // tokenizer_config.json content to go with it: chat_template, bos/eos/pad tokens, add_bos_token,
  // added_tokens_decoder, tokenizer_class; model_max_length when > 0.
  virtual nlohmann::json to_hf_tokenizer_config(int64_t model_max_length = 0) const;

 protected:
  int bos_id_ = -1, eos_id_ = -1, pad_id_ = -1;
  bool add_bos_ = false;
  // Keeps `source` and compiles it. A template that does not parse does not stop the load (plain
  // prompts still work): the error is printed to stderr and kept for every chat request.
  void set_chat_template(std::string source);

 private:
  std::string chat_template_;
  std::shared_ptr<const ChatTemplate> compiled_chat_template_;
  std::string chat_template_error_;
};

// From a checkpoint's tokenizer sources (HF dir: tokenizer.json / tokenizer.model and
// tokenizer_config.json; GGUF: tokenizer.ggml.*). Throws InputError.
std::unique_ptr<Tokenizer> load_tokenizer(const Checkpoint& ckpt);
// A GGUF file's own tokenizer (tokenizer.ggml.*), weights or none (llama.cpp's vocab-only files).
std::unique_ptr<Tokenizer> load_gguf_tokenizer(const GgufFile& g);

}  // namespace llmctl
