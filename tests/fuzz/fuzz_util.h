// Shared pieces of the fuzz harnesses: the exceptions that count as a clean rejection, the small
// tokenizers the request parsers and encode/decode harnesses run on (built once per process, in
// code: no model files), an in-memory file for the readers that take a path, and a byte reader
// that splits one fuzz input into parameters.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "server/api_error.h"

namespace llmctl {
class BpeTokenizer;
class SentencePieceTokenizer;
}  // namespace llmctl

namespace llmctl::fuzz {

// Runs f(). The engine's documented rejections of bad input (llmctl::Error and InputError,
// server::ApiError, nlohmann::json::exception) are swallowed; anything else escapes and is a
// finding (libFuzzer reports an uncaught exception as a crash).
template <class F>
bool expect_errors(F&& f) {
  try {
    f();
    return true;
  } catch (const llmctl::Error&) {
  } catch (const llmctl::server::ApiError&) {
  } catch (const nlohmann::json::exception&) {
  }
  return false;
}

// ChatML, as SmolLM2 and Qwen use it.
extern const char* const kChatmlTemplate;

// Byte-level BPE: the 256 bytes, merges that spell a few dozen English words (with and without a
// leading space), the added tokens <|endoftext|> <|im_start|> <|im_end|> (special) and <tool>
// (not special), bos/eos set, ChatML chat template. pre: a GGUF pre-tokenizer name ("smollm",
// "llama-bpe", "qwen2", "gpt2").
const BpeTokenizer& small_bpe(const std::string& pre = "smollm");
// SentencePiece BPE (Llama style): <unk> <s> </s>, byte-fallback pieces <0x00>..<0xFF>, a control
// token <ctl>, a user-defined <tool>, and scored pieces for the same words.
const SentencePieceTokenizer& small_sentencepiece();

// A memfd the readers can open by path (/proc/self/fd/N); rewritten for every input.
class MemFile {
 public:
  MemFile();
  ~MemFile();
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  // Replaces the content; returns the path to open.
  const std::string& write(const uint8_t* data, size_t size);

 private:
  int fd_ = -1;
  std::string path_;
};

// Splits a fuzz input: fixed-size values from the front, the rest as text.
class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : p_(data), n_(size) {}
  size_t left() const { return n_; }
  uint8_t u8() { return n_ ? (--n_, *p_++) : 0; }
  uint16_t u16() { return uint16_t(u8() | (u8() << 8)); }
  std::string_view rest() { return take(n_); }
  std::string_view take(size_t k) {
    k = k < n_ ? k : n_;
    std::string_view s(reinterpret_cast<const char*>(p_), k);
    p_ += k, n_ -= k;
    return s;
  }
  // Up to the first NUL (consumed, not returned), or everything when there is none.
  std::string_view until_nul() {
    std::string_view all(reinterpret_cast<const char*>(p_), n_);
    size_t z = all.find('\0');
    if (z == std::string_view::npos) return take(n_);
    std::string_view s = take(z);
    take(1);
    return s;
  }

 private:
  const uint8_t* p_;
  size_t n_;
};

}  // namespace llmctl::fuzz
