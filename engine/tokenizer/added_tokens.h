// Added tokens (special or not) are cut out of the text before pre-tokenization, as HF
// tokenizers' AddedVocabulary does: leftmost-longest matching, non-normalized tokens first, then
// normalized ones in what is left, with the lstrip / rstrip / single_word flags.
#pragma once
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace llmctl {

struct AddedToken {
  int id = -1;
  std::string content;
  bool special = false;
  bool lstrip = false, rstrip = false, single_word = false;
  bool normalized = false;

  nlohmann::json to_hf_json() const;  // the tokenizer.json "added_tokens" entry
  static AddedToken from_hf_json(const nlohmann::json& j);
};

// One piece of the text: either an added token (id >= 0) or plain text to pre-tokenize.
struct TextSegment {
  std::string_view text;
  int id = -1;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  const AddedToken* find(int id) const;
  // Splits `text`. With parse_special false, special tokens are left in the text (encoded as
  // plain text); non-special added tokens are still matched (HF's encode_special_tokens).
  void split(std::string_view text, bool parse_special, std::vector<TextSegment>& out) const;

 private:
  // One matching pass over the text pieces of `segs` with the tokens of one group.
  void pass(const std::vector<std::vector<int>>& first, bool parse_special,
            std::vector<TextSegment>& segs) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<int, size_t> by_id_;
  // Token indices per first byte, longest content first, for each group.
  std::vector<int> raw_, normalized_;
  std::vector<std::vector<int>> raw_first_, norm_first_;
};

}  // namespace llmctl
