// Structured output's entry point: a request body's constraint fields (response_format,
// structured_outputs, guided_*) -> ConstraintSpec -> GrammarCompiler, on a byte vocabulary. Byte 0
// picks the TGI form (parameters.grammar) and the walk's seed. Whatever compiles must be
// self-consistent: a random walk of up to 64 tokens through its masks, where every token a mask
// allows is accepted by the matcher.
#include <cstdint>
#include <vector>

#include "engine/core/json_bounded.h"
#include "engine/structured/constraint_fields.h"
#include "engine/structured/grammar_compiler.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/unit/byte_tokenizer.h"

using namespace llmctl;
using namespace llmctl::fuzz;

namespace {
GrammarCompiler& compiler() {
  static test::ByteTokenizer tok;
  static const std::vector<int> eos{test::ByteTokenizer::kImEnd};
  static CompileLimits limits = [] {
    CompileLimits l;
    l.max_text_bytes = 16 << 10;
    l.timeout = std::chrono::milliseconds(2000);
    return l;
  }();
  static GrammarCompiler c(tok, test::ByteTokenizer::kVocab, eos, limits);
  return c;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in(data, size);
  const uint8_t mode = in.u8();
  const std::string_view text = in.rest();
  expect_errors([&] {
    const nlohmann::json body = parse_json_bounded(text, kRequestJsonLimits, "the request body");
    const std::optional<ConstraintSpec> spec =
        (mode & 1) ? constraint_from_tgi_text(body, text) : constraint_from_request_text(body, text);
    if (!spec) return;
    auto c = compiler().compile(*spec);
    const std::vector<int> stops{test::ByteTokenizer::kImEnd};
    auto m = c->matcher(stops);
    std::vector<uint32_t> words(m->mask_words());
    uint32_t rng = mode * 2654435761u + 1;
    for (int step = 0; step < 64 && !m->terminated(); ++step) {
      m->fill_mask(words);
      std::vector<int> allowed;
      for (int id = 0; id < test::ByteTokenizer::kVocab; ++id)
        if (words[size_t(id) / 32] >> (id % 32) & 1u) allowed.push_back(id);
      if (allowed.empty()) __builtin_trap();  // compile() refuses grammars with no sentence; a walk never dead-ends
      rng = rng * 1664525u + 1013904223u;
      if (!m->accept(allowed[rng % allowed.size()])) __builtin_trap();  // the mask allowed it
    }
  });
  return 0;
}
