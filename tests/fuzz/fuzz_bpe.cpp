// Byte-level BPE encode/decode on a small tokenizer built in code (tests/fuzz/fuzz_util.cpp).
// Byte 0 picks the pre-tokenizer and flags; the rest is the text. Checks decode(encode(x)) == x
// (every byte has a token here), that encode makes only vocabulary ids, then decodes the text's
// bytes read as token ids: modulo the vocabulary size, or raw (out-of-range ids must be refused
// with an Error, never read out of bounds).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "engine/tokenizer/bpe_tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

using namespace llmctl;
using namespace llmctl::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const char* const kPre[] = {"smollm", "llama-bpe", "qwen2", "gpt2"};
  Bytes in(data, size);
  const uint8_t mode = in.u8();
  const BpeTokenizer& tok = small_bpe(kPre[mode & 3]);
  const bool parse_special = mode & 4, skip_special = mode & 8, raw_ids = mode & 16;
  const std::string_view text = in.rest();
  const int vocab = tok.vocab_size();

  expect_errors([&] {
    std::vector<int> ids = tok.encode(text, parse_special);
    for (int id : ids)
      if (id < 0 || id >= vocab) __builtin_trap();
    const std::string back = tok.decode(ids, false);
    if (back != text) {
      std::fprintf(stderr, "decode(encode(x)) != x: %zu bytes in, %zu out\n", text.size(), back.size());
      __builtin_trap();
    }
    (void)tok.decode(ids, skip_special);
  });

  // The text's bytes as little-endian 16-bit (or 32-bit raw) ids.
  std::vector<int> ids;
  if (raw_ids) {
    for (size_t i = 0; i + 4 <= text.size(); i += 4) {
      int32_t v;
      std::memcpy(&v, text.data() + i, 4);
      ids.push_back(v);
    }
  } else {
    for (size_t i = 0; i + 2 <= text.size(); i += 2)
      ids.push_back(int((uint8_t(text[i]) | (uint8_t(text[i + 1]) << 8)) % vocab));
  }
  const bool ok = expect_errors([&] {
    (void)tok.decode(ids, skip_special);
    for (int id : ids) {
      (void)tok.token_bytes(id);
      (void)tok.token_text(id);
      (void)tok.is_special(id);
    }
  });
  if (!ok && !raw_ids) __builtin_trap();  // ids in range always decode
  return 0;
}
