// SentencePieceTokenizer on a tiny model trained here with libsentencepiece (no model file needed).
#include <doctest/doctest.h>

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "engine/core/error.h"
#include "engine/tokenizer/sentencepiece_proto.h"
#include "engine/tokenizer/sentencepiece_tokenizer.h"

using namespace llmctl;

namespace {

std::string train_tiny_model() {
  auto dir = std::filesystem::temp_directory_path() / ("llmctl_sp_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto input = dir / "corpus.txt";
  {
    std::ofstream f(input);
    for (int i = 0; i < 200; ++i)
      f << "the quick brown fox jumps over the lazy dog " << i << "\n"
        << "hello world, tokenizers split text into pieces\n";
  }
  std::string proto;
  auto st = sentencepiece::SentencePieceTrainer::Train(
      "--input=" + input.string() +
          " --vocab_size=400 --model_type=bpe --byte_fallback=true --minloglevel=2"
          " --normalization_rule_name=identity --remove_extra_whitespaces=false"  // as Llama's model
          " --user_defined_symbols=<tool> --control_symbols=<ctl>",
      nullptr, &proto);
  std::filesystem::remove_all(dir);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  return proto;
}

}  // namespace

TEST_CASE("SentencePiece: encode/decode match libsentencepiece, control tokens cut out") {
  std::string proto = train_tiny_model();
  auto tok = SentencePieceTokenizer::from_serialized(proto, {{"chat_template", "{{ m }}"}});
  sentencepiece::SentencePieceProcessor sp;
  REQUIRE(sp.LoadFromSerializedProto(proto).ok());

  const std::string text = "hello quick dog 42, é 日本";
  std::vector<int> ids = tok->encode(text);
  CHECK(ids == sp.EncodeAsIds(text));
  CHECK(tok->decode(ids) == text);  // é and 日本 go through byte-fallback pieces
  CHECK(tok->bos_id() == sp.bos_id());
  CHECK(tok->eos_id() == sp.eos_id());
  CHECK(tok->add_bos());
  CHECK(tok->chat_template() == "{{ m }}");
  CHECK(tok->is_special(tok->bos_id()));
  CHECK(tok->token_to_id("<s>") == sp.bos_id());
  CHECK(tok->token_to_id("definitely-not-a-piece") == -1);

  int ctl = tok->token_to_id("<ctl>");
  REQUIRE(ctl >= 0);
  std::vector<int> with_ctl = tok->encode("hello<ctl>world");
  CHECK(std::find(with_ctl.begin(), with_ctl.end(), ctl) != with_ctl.end());
  CHECK(tok->decode(with_ctl) == "hello<ctl>world");
  CHECK(tok->decode(with_ctl, true) == "helloworld");
  std::vector<int> plain = tok->encode("hello<ctl>world", false);
  CHECK(std::find(plain.begin(), plain.end(), ctl) == plain.end());

  std::string joined;
  for (int id : sp.EncodeAsIds("hello world")) joined += tok->token_bytes(id);
  CHECK(joined == " hello world");  // the dummy prefix space is part of the first piece
  CHECK_THROWS_AS(tok->to_hf_tokenizer_json(), InputError);
  CHECK_THROWS_AS(SentencePieceTokenizer::from_file("/nonexistent/tokenizer.model"), InputError);
}

TEST_CASE("SentencePiece model rebuilt from GGUF-style vocabulary data encodes the same") {
  std::string proto = train_tiny_model();
  sentencepiece::SentencePieceProcessor sp;
  REQUIRE(sp.LoadFromSerializedProto(proto).ok());
  // What a GGUF "llama" tokenizer stores: pieces, scores, types (SentencePiece numbering).
  SentencePieceVocab v;
  for (int id = 0; id < sp.GetPieceSize(); ++id) {
    v.tokens.push_back(sp.IdToPiece(id));
    v.scores.push_back(sp.GetScore(id));
    v.types.push_back(sp.IsUnknown(id) ? 2 : sp.IsControl(id) ? 3 : sp.IdToPiece(id) == "<tool>" ? 4 : sp.IsByte(id) ? 6 : 1);
  }
  v.unk = sp.unk_id();
  v.bos = sp.bos_id();
  v.eos = sp.eos_id();
  auto tok = SentencePieceTokenizer::from_serialized(sentencepiece_model_proto(v));
  for (std::string text : {"hello quick dog 42, é 日本", "  two  spaces<tool>x", "the lazy fox\njumps"}) {
    CHECK(tok->encode(text, false) == sp.EncodeAsIds(text));
    CHECK(tok->decode(tok->encode(text)) == text);
  }
  CHECK(tok->bos_id() == sp.bos_id());
}
