// Byte-level BPE core on a tiny hand-made vocabulary: merge order, added-token splitting, bytes
// that are not valid UTF-8, decode(encode(x)) == x, and the tokenizer.json round trip.
#include <doctest/doctest.h>

#include <random>

#include "engine/core/error.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/byte_unicode.h"

using namespace llmctl;
using json = nlohmann::json;

namespace {

// All 256 bytes (ids 0..255 in byte order) plus the merges given ("a b" in byte spelling),
// each merge result appended as the next id, and the added tokens after that.
BpeTokenizer::Parts tiny_parts(const std::vector<std::string>& merges, std::vector<AddedToken> added = {},
                               const std::string& pre = "gpt2") {
  BpeTokenizer::Parts p;
  for (int b = 0; b < 256; ++b) p.vocab.push_back(bytes_to_unicode_text(std::string(1, char(b))));
  for (const auto& m : merges) {
    size_t sp = m.find(' ');
    p.merges.emplace_back(m.substr(0, sp), m.substr(sp + 1));
    p.vocab.push_back(m.substr(0, sp) + m.substr(sp + 1));
  }
  for (auto& t : added) {
    t.id = int(p.vocab.size());
    p.vocab.push_back(t.content);
    p.added.push_back(t);
  }
  p.pre = PreTokenizer::for_gguf(pre);
  return p;
}

std::vector<std::string> pieces(const Tokenizer& t, const std::vector<int>& ids) {
  std::vector<std::string> out;
  for (int id : ids) out.push_back(t.token_bytes(id));
  return out;
}

using Strs = std::vector<std::string>;

AddedToken added(const std::string& content, bool special = true) {
  AddedToken t;
  t.content = content;
  t.special = special;
  return t;
}

}  // namespace

TEST_CASE("merges apply by rank, leftmost first on equal rank") {
  BpeTokenizer t(tiny_parts({"h e", "l l", "he ll", "hell o", "\xC4\xA0 w", "o r", "\xC4\xA0w or", "\xC4\xA0wor ld",
                             "l d", "b c", "a b", "a a"}));
  // "l d" (rank 8) makes "ld", then " wor"+"ld" (rank 7) is available and applies.
  CHECK(pieces(t, t.encode("hello world")) == Strs{"hello", " world"});
  CHECK(pieces(t, t.encode("hellold")) == Strs{"hello", "ld"});
  // "b c" (rank 9) beats "a b" (rank 10).
  CHECK(pieces(t, t.encode("abc")) == Strs{"a", "bc"});
  CHECK(pieces(t, t.encode("aaa")) == Strs{"aa", "a"});
  CHECK(pieces(t, t.encode("aaaa")) == Strs{"aa", "aa"});
  CHECK(t.encode("").empty());
  CHECK(t.token_to_id("hello") == 256 + 3);
  CHECK(t.token_to_id("nope") == -1);
  CHECK_THROWS_AS(t.token_bytes(100000), InputError);
}

TEST_CASE("ignore_merges takes a piece that is in the vocabulary whole") {
  auto p = tiny_parts({"a b", "c d", "b c", "ab cd"});
  p.vocab.push_back("abcd_direct");  // not reachable by merges
  p.vocab.back() = "bcd";            // "bcd" is in the vocabulary, but no merge makes it
  p.model.ignore_merges = true;
  BpeTokenizer t(std::move(p));
  CHECK(pieces(t, t.encode("bcd")) == Strs{"bcd"});
  CHECK(pieces(t, t.encode("abcd")) == Strs{"abcd"});
}

TEST_CASE("added tokens are cut out before BPE, longest match first") {
  BpeTokenizer t(tiny_parts({"h i"}, {added("<|im_start|>"), added("<|im_end|>"), added("<|im"), added("<x>", false)}));
  int start = t.token_to_id("<|im_start|>"), end = t.token_to_id("<|im_end|>"), x = t.token_to_id("<x>");
  std::vector<int> ids = t.encode("<|im_start|>hi<x><|im_end|>\n");
  CHECK(ids == std::vector<int>{start, t.token_to_id("hi"), x, end, '\n' == '\n' ? t.token_to_id("\xC4\x8A") : -1});
  CHECK(t.is_special(start));
  CHECK_FALSE(t.is_special(x));
  CHECK(t.decode(ids) == "<|im_start|>hi<x><|im_end|>\n");
  CHECK(t.decode(ids, true) == "hi<x>\n");
  // parse_special off: special tokens are plain text, non-special added tokens still match.
  std::vector<int> plain = t.encode("<|im_start|>hi<x>", false);
  CHECK(std::find(plain.begin(), plain.end(), start) == plain.end());
  CHECK(plain.back() == x);
  CHECK(t.decode(plain) == "<|im_start|>hi<x>");
}

TEST_CASE("added token flags: lstrip, rstrip, single_word") {
  AddedToken l = added("<L>"), r = added("<R>"), w = added("tok", false);
  l.lstrip = true;
  r.rstrip = true;
  w.single_word = true;
  BpeTokenizer t(tiny_parts({}, {l, r, w}));
  int L = t.token_to_id("<L>"), R = t.token_to_id("<R>"), W = t.token_to_id("tok");
  CHECK(t.encode("a  <L>") == std::vector<int>{'a', L});   // the spaces before <L> go with it
  CHECK(t.encode("<R> \t b") == std::vector<int>{R, 'b'});  // the spaces after <R> too
  CHECK(t.encode("tok") == std::vector<int>{W});
  std::vector<int> inside = t.encode("atok");
  CHECK(std::find(inside.begin(), inside.end(), W) == inside.end());
}

TEST_CASE("bytes that are not valid UTF-8 still round-trip") {
  BpeTokenizer t(tiny_parts({"a b"}));
  for (std::string s : {std::string("\xff\xfe ab"), std::string("ab\xe2\x82"), std::string("\xc3"),
                        std::string("x\xed\xa0\x80y"), std::string("\xf4\x90\x80\x80"), std::string("\0a\0", 3)}) {
    std::vector<int> ids = t.encode(s);
    CHECK(t.decode(ids) == s);
  }
  // A partial code point is split into byte tokens; token_bytes gives the raw bytes back.
  std::vector<int> ids = t.encode("\xe2\x82");
  REQUIRE(ids.size() == 2);
  CHECK(t.token_bytes(ids[0]) == "\xe2");
  CHECK(t.token_bytes(ids[1]) == "\x82");
}

TEST_CASE("decode(encode(x)) == x on random UTF-8 (fixed seed)") {
  BpeTokenizer t(tiny_parts({"\xC4\xA0 t", "h e", "\xC4\xA0t he", "i n", "\xC4\xA0 \xC4\xA0", "1 2"},
                            {added("<|s|>")}, "smollm"));
  std::mt19937 rng(42);
  const std::pair<uint32_t, uint32_t> ranges[] = {{0x20, 0x7e},     {0x09, 0x0d},   {0xa0, 0x24f},
                                                  {0x370, 0x4ff},   {0x600, 0x6ff}, {0x900, 0x97f},
                                                  {0x3000, 0x30ff}, {0x4e00, 0x9fff}, {0xac00, 0xd7a3},
                                                  {0x1f300, 0x1faff}, {0x2000, 0x206f}};
  for (int iter = 0; iter < 2000; ++iter) {
    std::string s;
    int n = int(rng() % 40);
    for (int k = 0; k < n; ++k) {
      if (rng() % 30 == 0) {
        s += "<|s|>";
        continue;
      }
      auto [lo, hi] = ranges[rng() % std::size(ranges)];
      uint32_t cp = lo + rng() % (hi - lo + 1);
      if (cp >= 0xd800 && cp <= 0xdfff) cp = 'x';
      utf8_append(s, cp);
    }
    std::vector<int> ids = t.encode(s);
    REQUIRE_MESSAGE(t.decode(ids) == s, "iteration " << iter);
    std::string joined;
    for (int id : ids) joined += t.token_bytes(id);
    CHECK(joined == s);
  }
}

TEST_CASE("tokenizer.json round trip, and merges in both forms") {
  AddedToken im = added("<|im_end|>");
  auto p = tiny_parts({"h e", "l l", "he ll", "hell o"}, {im}, "smollm");
  p.eos = 256 + 4;
  p.bos = 256 + 4;
  p.add_bos = true;
  BpeTokenizer t(std::move(p));
  json j = t.to_hf_tokenizer_json();
  CHECK(j["model"]["merges"][0] == json::array({"h", "e"}));
  CHECK(j["post_processor"]["type"] == "TemplateProcessing");
  CHECK(j["added_tokens"][0]["content"] == "<|im_end|>");
  auto back = BpeTokenizer::from_hf_json(j, {{"eos_token", "<|im_end|>"}, {"chat_template", "{{ x }}"}});
  const std::string text = "hello 2024 hello<|im_end|> world";
  CHECK(back->encode(text) == t.encode(text));
  CHECK(back->add_bos());
  CHECK(back->bos_id() == t.bos_id());
  CHECK(back->eos_id() == 256 + 4);
  CHECK(back->chat_template() == "{{ x }}");
  // The older "a b" string form of merges reads the same.
  for (auto& m : j["model"]["merges"]) m = m[0].get<std::string>() + " " + m[1].get<std::string>();
  auto back2 = BpeTokenizer::from_hf_json(j);
  CHECK(back2->encode(text) == t.encode(text));
  json cfg = t.to_hf_tokenizer_config(8192);
  CHECK(cfg["eos_token"] == "<|im_end|>");
  CHECK(cfg["model_max_length"] == 8192);
  CHECK(cfg["added_tokens_decoder"]["260"]["special"] == true);
}

TEST_CASE("bad inputs are refused with context") {
  json j = BpeTokenizer(tiny_parts({"h e"})).to_hf_tokenizer_json();
  j["model"]["merges"].push_back(json::array({"zz", "q"}));
  CHECK_THROWS_WITH_AS(BpeTokenizer::from_hf_json(j), doctest::Contains("zz"), InputError);
  json wp = {{"model", {{"type", "WordPiece"}, {"vocab", json::object()}}}};
  CHECK_THROWS_WITH_AS(BpeTokenizer::from_hf_json(wp), doctest::Contains("WordPiece"), InputError);
  // GGUF vocab: merges that name unknown tokens are skipped (as llama.cpp does).
  std::vector<std::string> toks;
  for (int b = 0; b < 256; ++b) toks.push_back(bytes_to_unicode_text(std::string(1, char(b))));
  toks.push_back("he");
  auto g = BpeTokenizer::from_gguf_vocab(toks, {}, {"h e", "x yz"}, "smollm", -1, -1, -1, false, "");
  CHECK(g->model().skipped_merges() == 1);
  CHECK(pieces(*g, g->encode("hehe")) == Strs{"he", "he"});
  CHECK_THROWS_AS(BpeTokenizer::from_gguf_vocab(toks, {}, {"h e"}, "unknown-pre", -1, -1, -1, false, ""), InputError);
}
