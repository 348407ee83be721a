#include "tests/fuzz/fuzz_util.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/byte_unicode.h"
#include "engine/tokenizer/sentencepiece_proto.h"
#include "engine/tokenizer/sentencepiece_tokenizer.h"

namespace llmctl::fuzz {

const char* const kChatmlTemplate =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

namespace {

const std::vector<std::string>& words() {
  static const std::vector<std::string> w = {
      "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "hello", "world", "token",
      "tokenizer", "assistant", "user", "system", "message", "content", "model", "write", "haiku",
      "about", "sea", "capital", "France", "is", "Paris", "once", "upon", "a", "time", "2024", "ing",
      "tion", "er", "an", "in", "on", "at", "en", "re"};
  return w;
}

std::unique_ptr<BpeTokenizer> make_bpe(const std::string& pre) {
  BpeTokenizer::Parts p;
  std::set<std::string> have;
  for (int b = 0; b < 256; ++b) {
    p.vocab.push_back(bytes_to_unicode_text(std::string(1, char(b))));
    have.insert(p.vocab.back());
  }
  // Left-to-right merges spelling each word, with and without a leading space.
  for (const auto& w : words()) {
    for (const std::string& raw : {w, " " + w}) {
      const std::string spelled = bytes_to_unicode_text(raw);
      std::string prefix = bytes_to_unicode_text(raw.substr(0, 1));
      for (size_t i = 1; i < raw.size(); ++i) {
        std::string next = bytes_to_unicode_text(raw.substr(i, 1));
        std::string merged = prefix + next;
        if (!have.count(merged)) {
          p.merges.emplace_back(prefix, next);
          p.vocab.push_back(merged);
          have.insert(merged);
        }
        prefix = merged;
      }
    }
  }
  auto add = [&](const std::string& content, bool special) {
    AddedToken t;
    t.content = content;
    t.special = special;
    t.id = int(p.vocab.size());
    p.vocab.push_back(content);
    p.added.push_back(t);
    return t.id;
  };
  const int eot = add("<|endoftext|>", true);
  add("<|im_start|>", true);
  const int im_end = add("<|im_end|>", true);
  add("<tool>", false);
  p.bos = eot;
  p.eos = im_end;
  p.pad = eot;
  p.add_bos = false;
  p.pre = PreTokenizer::for_gguf(pre);
  p.chat_template = kChatmlTemplate;
  return std::make_unique<BpeTokenizer>(std::move(p));
}

std::unique_ptr<SentencePieceTokenizer> make_sentencepiece() {
  SentencePieceVocab v;
  auto piece = [&](const std::string& s, float score, int type) {
    v.tokens.push_back(s);
    v.scores.push_back(score);
    v.types.push_back(type);
  };
  piece("<unk>", 0, 2);
  piece("<s>", 0, 3);
  piece("</s>", 0, 3);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    piece(buf, 0, 6);
  }
  piece("<ctl>", 0, 3);
  piece("<tool>", 0, 4);
  const std::string space = "\xE2\x96\x81";  // U+2581, SentencePiece's space
  std::set<std::string> have;
  float score = -1;
  for (char c = 'a'; c <= 'z'; ++c) piece(std::string(1, c), score, 1), have.insert(std::string(1, c));
  piece(space, score, 1);
  have.insert(space);
  for (const auto& w : words()) {
    const std::string full = space + w;
    std::string prefix = space;
    for (char c : w) {
      prefix += c;
      if (have.insert(prefix).second) piece(prefix, score -= 0.5f, 1);
    }
    (void)full;
  }
  v.unk = 0, v.bos = 1, v.eos = 2, v.pad = -1;
  nlohmann::json cfg = {{"chat_template", kChatmlTemplate}, {"add_bos_token", true}};
  return SentencePieceTokenizer::from_serialized(sentencepiece_model_proto(v), cfg);
}

}  // namespace

const BpeTokenizer& small_bpe(const std::string& pre) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<BpeTokenizer>> made;
  std::lock_guard<std::mutex> lock(mu);
  auto& t = made[pre];
  if (!t) t = make_bpe(pre);
  return *t;
}

const SentencePieceTokenizer& small_sentencepiece() {
  static const std::unique_ptr<SentencePieceTokenizer> t = make_sentencepiece();
  return *t;
}

MemFile::MemFile() {
  fd_ = ::memfd_create("llmctl_fuzz", MFD_CLOEXEC);
  if (fd_ < 0) {
    std::perror("memfd_create");
    std::abort();
  }
  path_ = "/proc/self/fd/" + std::to_string(fd_);
}

MemFile::~MemFile() {
  if (fd_ >= 0) ::close(fd_);
}

const std::string& MemFile::write(const uint8_t* data, size_t size) {
  if (::ftruncate(fd_, 0) != 0) std::abort();
  size_t done = 0;
  while (done < size) {
    ssize_t w = ::pwrite(fd_, data + done, size - done, off_t(done));
    if (w <= 0) std::abort();
    done += size_t(w);
  }
  return path_;
}

}  // namespace llmctl::fuzz
