#include "engine/tokenizer/sentencepiece_proto.h"

#include <cstdint>
#include <cstring>

#include "engine/core/error.h"

namespace llmctl {
namespace {

// Protocol buffer wire format, just the pieces a ModelProto needs.
void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(char(v | 0x80));
    v >>= 7;
  }
  out.push_back(char(v));
}
void tag(std::string& out, int field, int wire) { varint(out, uint64_t(field) << 3 | wire); }
void field_varint(std::string& out, int field, int64_t v) {
  tag(out, field, 0);
  varint(out, uint64_t(v));  // negative int32 values are written as 10-byte varints, as protobuf does
}
void field_bytes(std::string& out, int field, const std::string& s) {
  tag(out, field, 2);
  varint(out, s.size());
  out += s;
}
void field_float(std::string& out, int field, float f) {
  tag(out, field, 5);
  char b[4];
  std::memcpy(b, &f, 4);  // little-endian hosts only, like the rest of llmctl
  out.append(b, 4);
}

}  // namespace

std::string sentencepiece_model_proto(const SentencePieceVocab& v) {
  LLM_REQUIRE(!v.tokens.empty()) << "GGUF: tokenizer.ggml.tokens is empty";
  LLM_REQUIRE(v.scores.empty() || v.scores.size() == v.tokens.size()) << "GGUF: tokenizer.ggml.scores size mismatch";
  LLM_REQUIRE(v.types.empty() || v.types.size() == v.tokens.size()) << "GGUF: tokenizer.ggml.token_type size mismatch";
  std::string model;
  bool has_bytes = false;
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    int type = v.types.empty() ? 1 : v.types[i];
    if (type < 1 || type > 6) type = 1;
    // SentencePiece has one unknown piece; converters mark padding entries UNKNOWN too (Phi-3's
    // [PAD32011]..): those become unused pieces, which encoding never produces (as llama.cpp).
    if (type == 2 && int(i) != v.unk) type = 5;
    if (int(i) == v.unk) type = 2;
    has_bytes |= type == 6;
    std::string piece;
    field_bytes(piece, 1, v.tokens[i]);
    field_float(piece, 2, v.scores.empty() ? 0.f : v.scores[i]);
    field_varint(piece, 3, type);
    field_bytes(model, 1, piece);  // ModelProto.pieces
  }
  std::string trainer;
  field_varint(trainer, 3, 2);  // model_type = BPE
  field_varint(trainer, 35, has_bytes);  // byte_fallback
  field_varint(trainer, 40, v.unk);
  field_varint(trainer, 41, v.bos);
  field_varint(trainer, 42, v.eos);
  field_varint(trainer, 43, v.pad);
  field_bytes(model, 2, trainer);
  std::string norm;
  field_bytes(norm, 1, "identity");
  field_varint(norm, 3, v.add_space_prefix);  // add_dummy_prefix
  field_varint(norm, 4, 0);                   // remove_extra_whitespaces
  field_varint(norm, 5, 1);                   // escape_whitespaces
  field_bytes(model, 3, norm);
  return model;
}

}  // namespace llmctl
