// SentencePiece encode/decode on a small model built in code (tests/fuzz/fuzz_util.cpp): byte
// fallback, a control and a user-defined token. Byte 0 gives flags; the rest is the text, encoded
// with and without special-token parsing and decoded, then read as token ids (modulo the
// vocabulary, or raw: out-of-range ids must be refused with an Error).
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "engine/tokenizer/sentencepiece_tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

using namespace llmctl;
using namespace llmctl::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in(data, size);
  const uint8_t mode = in.u8();
  const SentencePieceTokenizer& tok = small_sentencepiece();
  const bool parse_special = mode & 1, skip_special = mode & 2, raw_ids = mode & 4;
  const std::string_view text = in.rest();
  const int vocab = tok.vocab_size();

  expect_errors([&] {
    std::vector<int> ids = tok.encode(text, parse_special);
    for (int id : ids)
      if (id < 0 || id >= vocab) __builtin_trap();
    (void)tok.decode(ids, skip_special);
    (void)tok.token_to_id(text);
  });

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
