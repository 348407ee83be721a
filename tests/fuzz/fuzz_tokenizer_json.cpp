// tokenizer.json loader: the input is tokenizer.json text, optionally followed by a NUL and a
// tokenizer_config.json. Both go through parse_json_bounded (kModelJsonLimits) as the loader
// reads them; a tokenizer that loads then encodes and decodes a fixed text and writes itself back
// out as tokenizer.json / tokenizer_config.json.
#include <cstdint>
#include <string>

#include "engine/core/json_bounded.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

using namespace llmctl;
using namespace llmctl::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in(data, size);
  const std::string_view tok_text = in.until_nul();
  const std::string_view cfg_text = in.rest();
  expect_errors([&] {
    nlohmann::json j = parse_json_bounded(tok_text, kModelJsonLimits, "tokenizer.json");
    nlohmann::json cfg = nullptr;
    if (!cfg_text.empty()) cfg = parse_json_bounded(cfg_text, kModelJsonLimits, "tokenizer_config.json");
    auto tok = BpeTokenizer::from_hf_json(j, cfg, 0);
    const int vocab = tok->vocab_size();
    for (const char* text : {"Hello world! 2024 <|im_end|> caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC  x\n\ty", "\xFF\xC0 a"}) {
      for (bool special : {true, false}) {
        std::vector<int> ids = tok->encode(text, special);
        for (int id : ids)
          if (id < 0 || id >= vocab) __builtin_trap();  // encode only makes ids of the vocabulary
        (void)tok->decode(ids, false);
        (void)tok->decode(ids, true);
      }
    }
    for (int id = 0; id < vocab && id < 512; ++id) {
      (void)tok->token_bytes(id);
      (void)tok->token_to_id(tok->token_text(id));
      (void)tok->is_special(id);
    }
    (void)tok->to_hf_tokenizer_json().dump();
    (void)tok->to_hf_tokenizer_config(4096).dump();
  });
  return 0;
}
