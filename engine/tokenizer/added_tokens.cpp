#include "engine/tokenizer/added_tokens.h"

#include <algorithm>
#include <cctype>

#include "engine/core/error.h"
#include "engine/model/config.h"
#include "engine/tokenizer/byte_unicode.h"
#include "engine/tokenizer/regex.h"

namespace llmctl {
namespace {

// Rust's char::is_alphanumeric() || '_' (what HF's single_word tests), approximated with
// Unicode letters, numbers and combining marks.
bool is_word_char(std::string_view s, size_t pos, size_t len) {
  unsigned char c = s[pos];
  if (c < 0x80) return std::isalnum(c) || c == '_';
  static const Regex word(R"(^[\p{L}\p{N}\p{Mn}\p{Mc}]$)");
  std::vector<std::pair<size_t, size_t>> m;
  word.find_all(s.substr(pos, len), m);
  return !m.empty();
}

bool ends_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t b = s.size() - 1;  // back up to the lead byte of the last character
  while (b > 0 && s.size() - b < 4 && (static_cast<unsigned char>(s[b]) & 0xc0) == 0x80) --b;
  return is_word_char(s, b, s.size() - b);
}

bool starts_with_word(std::string_view s) {
  if (s.empty()) return false;
  uint32_t cp;
  size_t n = utf8_decode(s, 0, cp);
  return is_word_char(s, 0, n);
}

// Start of the whitespace run that ends `s`.
size_t trailing_space_start(std::string_view s) {
  size_t pos = s.size();
  while (pos > 0) {
    size_t b = pos - 1;
    while (b > 0 && pos - b < 4 && (static_cast<unsigned char>(s[b]) & 0xc0) == 0x80) --b;
    uint32_t cp;
    if (utf8_decode(s, b, cp) != pos - b || !is_unicode_whitespace(cp)) break;
    pos = b;
  }
  return pos;
}

// Length of the whitespace run that starts `s`.
size_t leading_space_len(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    uint32_t cp;
    size_t n = utf8_decode(s, pos, cp);
    if (!is_unicode_whitespace(cp)) break;
    pos += n;
  }
  return pos;
}

}  // namespace

nlohmann::json AddedToken::to_hf_json() const {
  return {{"id", id}, {"content", content}, {"single_word", single_word}, {"lstrip", lstrip},
          {"rstrip", rstrip}, {"normalized", normalized}, {"special", special}};
}

AddedToken AddedToken::from_hf_json(const nlohmann::json& j) {
  AddedToken t;
  const nlohmann::json& id = j.at("id");
  LLM_REQUIRE(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < kMaxVocabSize)
      << "added token id " << id.dump() << " is not a token id (0 to " << kMaxVocabSize - 1 << ")";
  t.id = id.get<int>();
  t.content = j.at("content").get<std::string>();
  t.special = j.value("special", false);
  t.lstrip = j.value("lstrip", false);
  t.rstrip = j.value("rstrip", false);
  t.single_word = j.value("single_word", false);
  t.normalized = j.value("normalized", !t.special);  // HF's default
  return t;
}

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  raw_first_.assign(256, {});
  norm_first_.assign(256, {});
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const auto& t = tokens_[i];
    LLM_REQUIRE(!t.content.empty()) << "added token " << t.id << " has empty content";
    by_id_[t.id] = i;
    auto& buckets = t.normalized ? norm_first_ : raw_first_;
    (t.normalized ? normalized_ : raw_).push_back(int(i));
    buckets[static_cast<unsigned char>(t.content[0])].push_back(int(i));
  }
  for (auto* b : {&raw_first_, &norm_first_})
    for (auto& bucket : *b)
      std::stable_sort(bucket.begin(), bucket.end(), [&](int a, int c) {
        return tokens_[a].content.size() > tokens_[c].content.size();
      });
}

const AddedToken* AddedTokenMatcher::find(int id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

void AddedTokenMatcher::split(std::string_view text, bool parse_special,
                              std::vector<TextSegment>& out) const {
  out.clear();
  if (text.empty()) return;
  out.push_back({text, -1});
  if (!raw_.empty()) pass(raw_first_, parse_special, out);
  if (!normalized_.empty()) pass(norm_first_, parse_special, out);
}

void AddedTokenMatcher::pass(const std::vector<std::vector<int>>& first, bool parse_special,
                             std::vector<TextSegment>& segs) const {
  std::vector<TextSegment> res;
  res.reserve(segs.size());
  for (const auto& seg : segs) {
    if (seg.id >= 0) {
      res.push_back(seg);
      continue;
    }
    std::string_view s = seg.text;
    size_t done = 0;  // text before this offset is already emitted
    // Leftmost-longest scan; a match that is then rejected (single_word, or a special token
    // while parse_special is off) still consumes its span, as aho-corasick's find_iter does.
    for (size_t pos = 0; pos < s.size();) {
      int best = -1;
      for (int i : first[static_cast<unsigned char>(s[pos])]) {
        const auto& c = tokens_[i].content;
        if (s.compare(pos, c.size(), c) == 0) {
          best = i;
          break;
        }
      }
      if (best < 0) {
        ++pos;
        continue;
      }
      const AddedToken& t = tokens_[best];
      size_t start = pos, stop = pos + t.content.size();
      pos = stop;
      if (t.special && !parse_special) continue;
      if (t.single_word && ((start > 0 && ends_with_word(s.substr(0, start))) ||
                            (stop < s.size() && starts_with_word(s.substr(stop)))))
        continue;
      if (t.lstrip) start = std::max(trailing_space_start(s.substr(0, start)), done);
      if (t.rstrip) stop += leading_space_len(s.substr(stop));
      if (start > done) res.push_back({s.substr(done, start - done), -1});
      res.push_back({s.substr(start, stop - start), t.id});
      done = stop;
      pos = stop;
    }
    if (done < s.size()) res.push_back({s.substr(done), -1});
  }
  segs.swap(res);
}

}  // namespace llmctl
