// Builds a SentencePiece ModelProto (serialized) from the vocabulary a GGUF file stores for
// tokenizer.ggml.model "llama", so libsentencepiece can tokenize it: pieces with scores and
// types (GGUF token types use SentencePiece's numbering), BPE model, byte fallback when the
// vocabulary has byte pieces, and the dummy-prefix / whitespace settings Llama uses.
#pragma once
#include <string>
#include <vector>

namespace llmctl {

struct SentencePieceVocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;  // empty: all 0
  std::vector<int> types;     // 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
  int unk = 0, bos = 1, eos = 2, pad = -1;
  bool add_space_prefix = true;
};

std::string sentencepiece_model_proto(const SentencePieceVocab& v);

}  // namespace llmctl
