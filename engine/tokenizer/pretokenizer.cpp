#include "engine/tokenizer/pretokenizer.h"

#include <algorithm>
#include <utility>

#include "engine/core/error.h"

namespace llmctl {

const char* const kGpt2SplitRegex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kLlama3SplitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2SplitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen3.5's: Qwen2's with combining marks (\p{M}) kept inside words.
const char* const kQwen35SplitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

namespace {

using json = nlohmann::json;
using Behavior = PreTokenizer::Behavior;
using Kind = PreTokenizer::Step::Kind;

const std::pair<const char*, Behavior> kBehaviors[] = {
    {"Removed", Behavior::Removed},
    {"Isolated", Behavior::Isolated},
    {"MergedWithPrevious", Behavior::MergedWithPrevious},
    {"MergedWithNext", Behavior::MergedWithNext},
    {"Contiguous", Behavior::Contiguous},
};

Behavior parse_behavior(const std::string& s) {
  for (auto& [name, b] : kBehaviors)
    if (s == name) return b;
  LLM_THROW() << "tokenizer.json: unknown Split behavior '" << s << "'";
}

const char* behavior_name(Behavior b) {
  for (auto& [name, v] : kBehaviors)
    if (v == b) return name;
  return "Isolated";
}

PreTokenizer::Step byte_level_step(bool add_prefix_space, bool use_regex, bool trim_offsets = true) {
  PreTokenizer::Step s;
  s.kind = Kind::ByteLevel;
  s.add_prefix_space = add_prefix_space;
  s.use_regex = use_regex;
  s.trim_offsets = trim_offsets;
  if (use_regex) s.regex = std::make_shared<Regex>(kGpt2SplitRegex);
  return s;
}

PreTokenizer::Step split_step(const std::string& pattern, bool literal, Behavior b, bool invert) {
  PreTokenizer::Step s;
  s.kind = Kind::Split;
  s.regex = std::make_shared<Regex>(pattern, literal);
  s.behavior = b;
  s.invert = invert;
  return s;
}

PreTokenizer::Step digits_step(bool individual) {
  PreTokenizer::Step s;
  s.kind = Kind::Digits;
  s.individual_digits = individual;
  // HF tests char::is_numeric (Unicode N*); runs of them are one piece unless individual.
  s.regex = std::make_shared<Regex>(individual ? R"(\p{N})" : R"(\p{N}+)");
  return s;
}

// Nesting of Sequences walked (real files nest one level); steps in all.
constexpr int kMaxSequenceDepth = 16;
constexpr size_t kMaxSteps = 64;

void add_from_json(PreTokenizer& pt, const json& j, int depth) {
  LLM_REQUIRE(j.is_object()) << "tokenizer.json: a pre_tokenizer is not an object";
  LLM_REQUIRE(pt.steps().size() < kMaxSteps) << "tokenizer.json: pre_tokenizer has more than " << kMaxSteps << " steps";
  std::string type = j.value("type", "");
  if (type == "Sequence") {
    LLM_REQUIRE(depth < kMaxSequenceDepth)
        << "tokenizer.json: pre_tokenizer Sequences nest deeper than " << kMaxSequenceDepth << " levels";
    const json& subs = j.at("pretokenizers");
    LLM_REQUIRE(subs.is_array()) << "tokenizer.json: pre_tokenizer Sequence has no pretokenizers list";
    for (const auto& sub : subs) add_from_json(pt, sub, depth + 1);
  } else if (type == "ByteLevel") {
    pt.add(byte_level_step(j.value("add_prefix_space", true), j.value("use_regex", true),
                           j.value("trim_offsets", true)));
  } else if (type == "Split") {
    const json& pat = j.at("pattern");
    bool literal = pat.contains("String");
    std::string p = literal ? pat.at("String").get<std::string>() : pat.at("Regex").get<std::string>();
    pt.add(split_step(p, literal, parse_behavior(j.value("behavior", "Isolated")), j.value("invert", false)));
  } else if (type == "Digits") {
    pt.add(digits_step(j.value("individual_digits", false)));
  } else {
    LLM_THROW() << "tokenizer.json: pre_tokenizer type '" << type << "' is not supported "
                << "(supported: ByteLevel, Split, Digits, Sequence)";
  }
}

// HF's split semantics: the matches and the gaps between them cover the text; `behavior` decides
// what becomes of the matches. Returns [begin, end) ranges, empty ones dropped.
void apply_split(const PreTokenizer::Step& s, std::string_view text, size_t base,
                 std::vector<std::pair<size_t, size_t>>& matches,
                 std::vector<std::pair<size_t, size_t>>& out) {
  matches.clear();
  s.regex->find_all(text, matches);
  struct Seg { size_t b, e; bool m; };
  std::vector<Seg> segs;
  segs.reserve(matches.size() * 2 + 1);
  size_t prev = 0;
  for (auto [b, e] : matches) {
    if (b > prev) segs.push_back({prev, b, s.invert});
    segs.push_back({b, e, !s.invert});
    prev = e;
  }
  if (prev < text.size()) segs.push_back({prev, text.size(), s.invert});

  std::vector<Seg> res;
  res.reserve(segs.size());
  bool prev_match = false;
  switch (s.behavior) {
    case Behavior::Removed:
      for (auto& g : segs)
        if (!g.m) res.push_back(g);
      break;
    case Behavior::Isolated:
      res = std::move(segs);
      break;
    case Behavior::MergedWithPrevious:
      for (auto& g : segs) {
        if (g.m && !prev_match && !res.empty()) res.back().e = g.e;
        else res.push_back(g);
        prev_match = g.m;
      }
      break;
    case Behavior::MergedWithNext:
      for (size_t i = segs.size(); i-- > 0;) {
        auto& g = segs[i];
        if (g.m && !prev_match && !res.empty()) res.back().b = g.b;
        else res.push_back(g);
        prev_match = g.m;
      }
      std::reverse(res.begin(), res.end());
      break;
    case Behavior::Contiguous:
      for (auto& g : segs) {
        if (g.m == prev_match && !res.empty()) res.back().e = g.e;
        else res.push_back(g);
        prev_match = g.m;
      }
      break;
  }
  for (auto& g : res)
    if (g.e > g.b) out.emplace_back(base + g.b, base + g.e);
}

}  // namespace

PreTokenizer PreTokenizer::from_hf_json(const json& j) {
  PreTokenizer pt;
  if (j.is_null()) return pt;
  try {
    add_from_json(pt, j, 0);
  } catch (const json::exception& e) {  // a field of the wrong type
    LLM_THROW() << "tokenizer.json: pre_tokenizer: " << e.what();
  }
  for (size_t i = 0; i + 1 < pt.steps_.size(); ++i)
    LLM_REQUIRE(pt.steps_[i].kind != Kind::ByteLevel)
        << "tokenizer.json: a ByteLevel pre-tokenizer must be the last step of the Sequence";
  return pt;
}

std::vector<std::string> PreTokenizer::gguf_names() {
  return {"default", "gpt2", "gpt-2", "smollm", "llama-bpe", "llama3", "llama-v3", "qwen2",
          "deepseek-r1-qwen", "qwen35", "starcoder", "refact", "command-r", "mpt", "deepseek-coder"};
}

PreTokenizer PreTokenizer::for_gguf(const std::string& name) {
  PreTokenizer pt;
  if (name == "default" || name == "gpt2" || name == "gpt-2" || name == "mpt" || name.empty()) {
    pt.add(byte_level_step(false, true));
  } else if (name == "smollm" || name == "starcoder" || name == "refact" || name == "command-r") {
    // SmolLM's tokenizer.json: Sequence[Digits(individual_digits), ByteLevel(use_regex)].
    pt.add(digits_step(true));
    pt.add(byte_level_step(false, true));
  } else if (name == "llama-bpe" || name == "llama3" || name == "llama-v3") {
    pt.add(split_step(kLlama3SplitRegex, false, Behavior::Isolated, false));
    pt.add(byte_level_step(false, false));
  } else if (name == "qwen2" || name == "deepseek-r1-qwen") {
    pt.add(split_step(kQwen2SplitRegex, false, Behavior::Isolated, false));
    pt.add(byte_level_step(false, false));
  } else if (name == "deepseek-coder") {
    // llama.cpp's sequence for it: each split applied to the pieces the previous ones left.
    for (const char* re : {R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+",
                           R"(\p{N})"})
      pt.add(split_step(re, false, Behavior::Isolated, false));
    pt.add(byte_level_step(false, false));
  } else if (name == "qwen35") {
    pt.add(split_step(kQwen35SplitRegex, false, Behavior::Isolated, false));
    pt.add(byte_level_step(false, false));
  } else {
    std::string known;
    for (auto& n : gguf_names()) known += (known.empty() ? "" : ", ") + n;
    LLM_THROW() << "GGUF tokenizer.ggml.pre '" << name << "' is not supported (supported: " << known << ")";
  }
  return pt;
}

json PreTokenizer::to_hf_json() const {
  std::vector<json> parts;
  for (const auto& s : steps_) {
    switch (s.kind) {
      case Kind::ByteLevel:
        parts.push_back({{"type", "ByteLevel"}, {"add_prefix_space", s.add_prefix_space},
                         {"trim_offsets", s.trim_offsets}, {"use_regex", s.use_regex}});
        break;
      case Kind::Digits:
        parts.push_back({{"type", "Digits"}, {"individual_digits", s.individual_digits}});
        break;
      case Kind::Split:
        parts.push_back({{"type", "Split"},
                         {"pattern", {{s.regex->literal() ? "String" : "Regex", s.regex->pattern()}}},
                         {"behavior", behavior_name(s.behavior)},
                         {"invert", s.invert}});
        break;
    }
  }
  if (parts.empty()) return nullptr;
  if (parts.size() == 1) return parts[0];
  return {{"type", "Sequence"}, {"pretokenizers", parts}};
}

bool PreTokenizer::byte_level() const {
  return !steps_.empty() && steps_.back().kind == Kind::ByteLevel;
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& pieces,
                         std::deque<std::string>& arena) const {
  std::vector<std::string_view> cur{text}, next;
  std::vector<std::pair<size_t, size_t>> matches, ranges;
  for (const auto& s : steps_) {
    next.clear();
    for (std::string_view piece : cur) {
      if (s.kind == Kind::ByteLevel && s.add_prefix_space && piece.front() != ' ') {
        std::string& s2 = arena.emplace_back();
        s2.reserve(piece.size() + 1);
        s2.push_back(' ');
        s2.append(piece);
        piece = s2;
      }
      if (!s.regex) {
        next.push_back(piece);
        continue;
      }
      ranges.clear();
      apply_split(s, piece, 0, matches, ranges);
      for (auto [b, e] : ranges) next.push_back(piece.substr(b, e - b));
    }
    cur.swap(next);
  }
  for (auto p : cur)
    if (!p.empty()) pieces.push_back(p);
}

std::vector<std::string> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> views;
  std::deque<std::string> arena;
  if (!text.empty()) split(text, views, arena);
  return {views.begin(), views.end()};
}

}  // namespace llmctl
