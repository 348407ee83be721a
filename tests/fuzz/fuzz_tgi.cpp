// TGI request parsing (/generate, /generate_stream): byte 0 picks the tokenizer; the rest is the
// request body, parsed as the server parses it. An accepted request must hold in-range token ids
// and valid sampling parameters.
#include <cstdint>

#include "engine/core/json_bounded.h"
#include "server/tgi_api.h"
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
  const Tokenizer& tok = (mode & 1) ? static_cast<const Tokenizer&>(small_sentencepiece())
                                    : static_cast<const Tokenizer&>(small_bpe());
  const ModelLimits limits = tiny_limits(tok);
  const std::string_view body_text = in.rest();
  expect_errors([&] {
    nlohmann::json body = parse_json_bounded(body_text, kRequestJsonLimits, "the request body");
    TgiRequest r;
    try {
      r = parse_tgi_request(body, tok, limits);
    } catch (const InputError& e) {
      throw to_api_error(e);
    }
    check_accepted({r.prompt}, r.params, limits.vocab_size);
    (void)tgi_finish_reason("length", r.params);
    (void)tgi_finish_reason("stop", r.params);
  });
  return 0;
}
