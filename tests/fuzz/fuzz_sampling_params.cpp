// SamplingParams::from_json: byte 0 picks the vocabulary size (unknown, or 300) and whether a
// non-default base is used; the rest is a JSON object as a request carries it. Accepted
// parameters must pass validate() again.
#include <cstdint>

#include "engine/core/json_bounded.h"
#include "engine/sample/sampling_params.h"
#include "tests/fuzz/fuzz_util.h"

using namespace llmctl;
using namespace llmctl::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in(data, size);
  const uint8_t mode = in.u8();
  const int vocab = (mode & 1) ? 300 : 0;
  SamplingParams base;
  if (mode & 2) {
    base.max_tokens = 16;
    base.temperature = 0.0f;
    base.stop = {"\n\n"};
    base.seed = 7;
  }
  const std::string_view text = in.rest();
  expect_errors([&] {
    nlohmann::json j = parse_json_bounded(text, kRequestJsonLimits, "the request body");
    SamplingParams p = SamplingParams::from_json(j, vocab, {"prompt", "messages", "model", "stream"}, base);
    try {
      p.validate(vocab);
    } catch (const InputError&) {
      __builtin_trap();  // from_json validates what it returns
    }
    (void)p.greedy();
    if (p.num_generated_sequences() < p.n) __builtin_trap();
  });
  return 0;
}
