// Pre-tokenizer: splits text into the pieces BPE runs on, as HF tokenizers' pre_tokenizers do.
// Supported steps: Split (regex or literal, all five behaviors, invert), ByteLevel (GPT-2 regex,
// add_prefix_space), Digits (individual or runs), and a Sequence of these. Pieces are raw bytes;
// the byte-level alphabet is applied later by the BPE model.
#pragma once
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/regex.h"

namespace llmctl {

// The GPT-2 split (what ByteLevel(use_regex=true) applies).
extern const char* const kGpt2SplitRegex;
extern const char* const kLlama3SplitRegex;
extern const char* const kQwen2SplitRegex;
extern const char* const kQwen35SplitRegex;

class PreTokenizer {
 public:
  enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
  struct Step {
    enum class Kind { Split, ByteLevel, Digits } kind = Kind::Split;
    std::shared_ptr<const Regex> regex;  // Split, and ByteLevel with use_regex
    Behavior behavior = Behavior::Isolated;
    bool invert = false;
    bool add_prefix_space = false;  // ByteLevel
    bool use_regex = true;          // ByteLevel
    bool trim_offsets = true;       // ByteLevel; offsets only, kept for the JSON round trip
    bool individual_digits = false; // Digits
  };

  PreTokenizer() = default;  // no steps: the whole text is one piece
  // `j` is tokenizer.json's "pre_tokenizer" (null allowed). Throws InputError on unsupported types.
  static PreTokenizer from_hf_json(const nlohmann::json& j);
  // GGUF tokenizer.ggml.pre names: default/gpt2, smollm, llama-bpe/llama3, qwen2, ...
  static PreTokenizer for_gguf(const std::string& pre_name);
  static std::vector<std::string> gguf_names();
  nlohmann::json to_hf_json() const;

  void add(Step s) { steps_.push_back(std::move(s)); }
  const std::vector<Step>& steps() const { return steps_; }
  bool byte_level() const;

  // Appends the pieces of `text` to `pieces`; strings the steps create (a prefix space) are kept
  // in `arena`, which must outlive the views.
  void split(std::string_view text, std::vector<std::string_view>& pieces,
             std::deque<std::string>& arena) const;
  std::vector<std::string> split(std::string_view text) const;  // convenience (tests)

 private:
  std::vector<Step> steps_;
};

}  // namespace llmctl
