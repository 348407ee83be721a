// Token ids and sizes in tokenizer files are bounded before anything is allocated from them, and
// nesting is bounded before anything recurses: huge added-token ids, a vocabulary id of 20M or 50M,
// pre_tokenizer / post_processor Sequences nested 100k deep, a tokenizer larger than its model's
// vocabulary, GGUF special-token ids past the token list.
#include <doctest/doctest.h>

#include <string>

#include "engine/core/error.h"
#include "engine/model/checkpoint.h"
#include "engine/model/gguf.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/byte_unicode.h"
#include "format_test_util.h"

using namespace llmctl;
using namespace llmctl::test;
using json = nlohmann::json;

namespace {

// tokenizer.json of 256 byte tokens, one merge ("h e" -> 256) and one added token (257).
json tiny_tokenizer_json() {
  BpeTokenizer::Parts p;
  for (int b = 0; b < 256; ++b) p.vocab.push_back(bytes_to_unicode_text(std::string(1, char(b))));
  p.merges.emplace_back("h", "e");
  p.vocab.push_back("he");
  AddedToken t;
  t.id = 257;
  t.content = "<|end|>";
  t.special = true;
  p.vocab.push_back(t.content);
  p.added.push_back(t);
  p.pre = PreTokenizer::for_gguf("gpt2");
  json j = BpeTokenizer(std::move(p)).to_hf_tokenizer_json();
  j["model"]["vocab"].erase("<|end|>");  // listed in added_tokens only
  return j;
}

std::string hf_error(const json& tj, int max_vocab = 0) {
  try {
    BpeTokenizer::from_hf_json(tj, nullptr, max_vocab);
    return "";
  } catch (const InputError& e) {
    return e.what();
  }
}

// A checkpoint whose tokenizer comes from `dir` and whose model vocabulary is `vocab`.
Checkpoint with_vocab(const ScratchDir& dir, int vocab) {
  Checkpoint ck;
  ck.config.vocab_size = vocab;
  ck.source_path = dir.path.string();
  ck.source_format = "hf";
  ck.hf_dir = dir.path.string();
  return ck;
}

bool has(const std::string& msg, const std::string& part) { return msg.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("tokenizer limits: a valid tokenizer.json still loads") {
  auto t = BpeTokenizer::from_hf_json(tiny_tokenizer_json(), nullptr, 300);
  CHECK(t->vocab_size() == 258);
  CHECK(t->encode("he<|end|>") == std::vector<int>{256, 257});
}

TEST_CASE("tokenizer limits: huge token ids are refused before anything is allocated") {
  json j = tiny_tokenizer_json();
  j["added_tokens"][0]["id"] = 2147483647;  // was: int overflow, then a write far out of bounds
  std::string err = hf_error(j);
  CHECK(has(err, "added token <|end|> has id 2147483647"));
  CHECK(has(err, "outside"));

  for (int64_t id : {int64_t(20000000), int64_t(50000000), int64_t(1) << 40, int64_t(-3)}) {
    CAPTURE(id);
    j = tiny_tokenizer_json();
    j["model"]["vocab"]["zz"] = id;  // was: a table of 20M (3 GB) or 50M entries (out of memory)
    err = hf_error(j);
    CHECK(has(err, "vocabulary entry 'zz' has id " + std::to_string(id)));
  }
  j = tiny_tokenizer_json();
  j["model"]["vocab"]["zz"] = "7";
  CHECK(has(hf_error(j), "not an integer"));
  j = tiny_tokenizer_json();
  j["added_tokens"][0]["id"] = 1.5;
  CHECK(has(hf_error(j), "not an integer"));

  // Against the model's vocabulary: ids past it are refused with both numbers.
  j = tiny_tokenizer_json();
  err = hf_error(j, 200);
  CHECK(has(err, "model.vocab has 257 entries, more than the model's vocabulary (200)"));
  err = hf_error(j, 257);
  CHECK(has(err, "added token <|end|> has id 257, outside the model's vocabulary [0, 257)"));
}

TEST_CASE("tokenizer limits: nesting of pre_tokenizer and post_processor is bounded") {
  // In memory (no parse limit in the way): the walkers themselves refuse deep Sequences.
  json pre = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  for (int i = 0; i < 1000; ++i) pre = {{"type", "Sequence"}, {"pretokenizers", json::array({pre})}};
  json j = tiny_tokenizer_json();
  j["pre_tokenizer"] = pre;
  CHECK(has(hf_error(j), "pre_tokenizer Sequences nest deeper than 16"));
  json post = {{"type", "ByteLevel"}};
  for (int i = 0; i < 1000; ++i) post = {{"type", "Sequence"}, {"processors", json::array({post})}};
  j = tiny_tokenizer_json();
  j["post_processor"] = post;
  CHECK(has(hf_error(j), "post_processor Sequences nest deeper than 16"));

  // From files, 100k deep: refused while parsing (the parse itself is bounded), no stack overflow.
  ScratchDir dir("tok_deep");
  for (const char* key : {"pre_tokenizer", "post_processor", "normalizer"}) {
    CAPTURE(key);
    std::string text = tiny_tokenizer_json().dump();
    std::string deep;
    for (int i = 0; i < 100000; ++i) deep += R"({"type": "Sequence", "pretokenizers": [)";
    deep += "{}";
    for (int i = 0; i < 100000; ++i) deep += "]}";
    text.insert(1, "\"" + std::string(key) + "\": " + deep + ", ");
    write_text(dir.file("tokenizer.json"), text);
    CHECK_THROWS_WITH_AS(load_tokenizer(with_vocab(dir, 300)), doctest::Contains("nested deeper than"), InputError);
  }
}

TEST_CASE("tokenizer limits: the tokenizer and the model's vocabulary are reconciled") {
  ScratchDir dir("tok_vocab");
  write_text(dir.file("tokenizer.json"), tiny_tokenizer_json().dump());
  // Larger than the model: refused, with both numbers.
  CHECK_THROWS_WITH_AS(load_tokenizer(with_vocab(dir, 100)),
                       doctest::Contains("model.vocab has 257 entries, more than the model's vocabulary (100)"),
                       InputError);
  CHECK_THROWS_WITH_AS(load_tokenizer(with_vocab(dir, 257)), doctest::Contains("has id 257"), InputError);
  // Padded model vocabulary (more rows than tokens): loads.
  auto t = load_tokenizer(with_vocab(dir, 320));
  CHECK(t->vocab_size() == 258);
  CHECK(load_tokenizer(with_vocab(dir, 258))->vocab_size() == 258);
  // tokenizer_config.json is read with the same bounds.
  write_text(dir.file("tokenizer_config.json"), std::string(100, '[') + std::string(100, ']'));
  CHECK_THROWS_WITH_AS(load_tokenizer(with_vocab(dir, 320)), doctest::Contains("nested deeper"), InputError);
}

TEST_CASE("tokenizer limits: GGUF tokenizer ids are bounded by the token list") {
  ScratchDir dir("tok_gguf");
  std::vector<std::string> toks;
  for (int b = 0; b < 256; ++b) toks.push_back(bytes_to_unicode_text(std::string(1, char(b))));
  auto open = [&](const std::string& key, uint32_t id, int model_vocab) {
    GgufBuilder g;
    g.kv_str("tokenizer.ggml.model", "gpt2");
    g.kv_str_array("tokenizer.ggml.tokens", toks);
    if (!key.empty()) g.kv_u32(key, id);
    write_bytes(dir.file("t.gguf"), g.build());
    Checkpoint ck;
    ck.config.vocab_size = model_vocab;
    ck.source_path = dir.file("t.gguf");
    ck.gguf = GgufFile::open(dir.file("t.gguf"));
    return load_tokenizer(ck);
  };
  CHECK(open("tokenizer.ggml.eos_token_id", 5, 256)->eos_id() == 5);
  CHECK_THROWS_WITH_AS(open("tokenizer.ggml.eos_token_id", 256, 256),
                       doctest::Contains("tokenizer.ggml.eos_token_id = 256 is outside the vocabulary of 256 tokens"),
                       InputError);
  CHECK_THROWS_WITH_AS(open("tokenizer.ggml.bos_token_id", 0xffffffffu, 256),
                       doctest::Contains("tokenizer.ggml.bos_token_id = 4294967295"), InputError);
  CHECK_THROWS_WITH_AS(open("", 0, 200), doctest::Contains("the tokenizer has 256 tokens but the model's vocabulary has 200"),
                       InputError);
}
