// Pre-tokenizer splits against what HF tokenizers gives for the same input (expected pieces were
// printed by tokenizers 0.23 pre_tokenize_str, byte-level spelling undone).
#include <doctest/doctest.h>

#include "engine/core/error.h"
#include "engine/tokenizer/byte_unicode.h"
#include "engine/tokenizer/pretokenizer.h"

using namespace llmctl;
using json = nlohmann::json;
using Pieces = std::vector<std::string>;

TEST_CASE("byte alphabet: every byte round-trips, space is G-dot, newline is C-dot") {
  for (int b = 0; b < 256; ++b) {
    std::string raw(1, char(b)), back;
    REQUIRE(unicode_text_to_bytes(bytes_to_unicode_text(raw), back));
    CHECK(back == raw);
  }
  CHECK(bytes_to_unicode_text(" the\n") == "\xC4\xA0the\xC4\x8A");  // "Ġthe Ċ"
  std::string out = "keep";
  CHECK_FALSE(unicode_text_to_bytes("<｜x｜>", out));
  CHECK(out == "keep");
}

TEST_CASE("GPT-2 ByteLevel regex split") {
  PreTokenizer pt = PreTokenizer::for_gguf("gpt2");
  CHECK(pt.split("Hello world's  123\n\n x") == Pieces{"Hello", " world", "'s", " ", " 123", "\n\n", " x"});
  CHECK(pt.split("I'LL  go\t\tnow   ") == Pieces{"I", "'", "LL", " ", " go", "\t", "\t", "now", "   "});
  // U+0085 is whitespace for HF (Oniguruma) but not for PCRE2's \s: regex.cpp adjusts.
  CHECK(pt.split("a  \u0085 x") == Pieces{"a", "  \u0085", " x"});
}

TEST_CASE("smollm: individual digits, then the GPT-2 split") {
  PreTokenizer pt = PreTokenizer::for_gguf("smollm");
  CHECK(pt.split("year 2024,  x1") == Pieces{"year", " ", "2", "0", "2", "4", ",", " ", " x", "1"});
  CHECK(pt.to_hf_json() == json::parse(R"({"type":"Sequence","pretokenizers":[
      {"type":"Digits","individual_digits":true},
      {"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true}]})"));
}

TEST_CASE("llama3 split regex") {
  PreTokenizer pt = PreTokenizer::for_gguf("llama-bpe");
  CHECK(pt.split("Price: 12345 USD's\n\n  ok") ==
        Pieces{"Price", ":", " ", "123", "45", " USD", "'s", "\n\n", " ", " ok"});
}

TEST_CASE("Split behaviors and ByteLevel add_prefix_space from tokenizer.json") {
  auto split = [](const char* behavior, bool invert = false) {
    json j = {{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}, {"invert", invert}};
    return PreTokenizer::from_hf_json(j).split("a-b--c-");
  };
  CHECK(split("Removed") == Pieces{"a", "b", "c"});
  CHECK(split("Isolated") == Pieces{"a", "-", "b", "-", "-", "c", "-"});
  CHECK(split("MergedWithPrevious") == Pieces{"a-", "b-", "-", "c-"});
  CHECK(split("MergedWithNext") == Pieces{"a", "-b", "-", "-c", "-"});
  CHECK(split("Contiguous") == Pieces{"a", "-", "b", "--", "c", "-"});
  CHECK(split("Isolated", true) == Pieces{"a", "-", "b", "-", "-", "c", "-"});

  PreTokenizer bl = PreTokenizer::from_hf_json({{"type", "ByteLevel"}, {"add_prefix_space", true}});
  CHECK(bl.split("hi") == Pieces{" hi"});
  CHECK(bl.split(" hi") == Pieces{" hi"});
}

TEST_CASE("unsupported pre-tokenizers and GGUF names are refused with a message") {
  CHECK_THROWS_AS(PreTokenizer::from_hf_json({{"type", "Metaspace"}}), InputError);
  CHECK_THROWS_WITH_AS(PreTokenizer::for_gguf("no-such-pre"), doctest::Contains("no-such-pre"), InputError);
  CHECK_THROWS_AS(PreTokenizer::from_hf_json({{"type", "Split"}, {"pattern", {{"Regex", "(["}}}}), InputError);
}

TEST_CASE("invalid UTF-8 never matches, so it lands in its own pieces") {
  PreTokenizer pt = PreTokenizer::for_gguf("gpt2");
  Pieces p = pt.split("ab\xff\xfe cd");
  std::string joined;
  for (auto& s : p) joined += s;
  CHECK(joined == "ab\xff\xfe cd");
  CHECK(p.front() == "ab");
  CHECK(p.back() == " cd");
}
