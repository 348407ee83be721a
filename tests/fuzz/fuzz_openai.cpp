// OpenAI request parsing (/v1/completions and /v1/chat/completions): byte 0 picks the route and
// the tokenizer (small byte-level BPE or SentencePiece, both with a ChatML template); the rest is
// the request body, parsed as the server parses it (parse_json_bounded, kRequestJsonLimits; tools
// read again in order from the body's text). An
// accepted request must hold only in-range token ids and valid sampling parameters.
#include <cstdint>

#include "engine/core/json_bounded.h"
#include "server/openai_api.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/sentencepiece_tokenizer.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/request_checks.h"

using namespace llmctl;
using namespace llmctl::fuzz;
using namespace llmctl::server;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in(data, size);
  const uint8_t mode = in.u8();
  const OpenAiApi api = (mode & 1) ? OpenAiApi::chat : OpenAiApi::completions;
  const Tokenizer& tok = (mode & 2) ? static_cast<const Tokenizer&>(small_sentencepiece())
                                    : static_cast<const Tokenizer&>(small_bpe());
  static const auto hermes = make_tool_call_format("hermes");
  ModelLimits limits = tiny_limits(tok);
  limits.tool_format = hermes.get();
  const std::string_view body_text = in.rest();
  expect_errors([&] {
    nlohmann::json body = parse_json_bounded(body_text, kRequestJsonLimits, "the request body");
    OpenAiRequest r;
    try {
      r = parse_openai_request(api, body, tok, limits, {}, body_text);
    } catch (const InputError& e) {
      throw to_api_error(e);  // as the HTTP layer answers it
    }
    check_accepted(r.prompts, r.params, limits.vocab_size);
  });
  return 0;
}
