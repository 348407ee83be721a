#include "server/reasoning_parser.h"

namespace llmctl::server {

namespace {
constexpr std::string_view kOpen = "<think>", kClose = "</think>";

// Length of the longest suffix of s that is a proper prefix of tag (what may still become it).
size_t partial_tag(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

bool blank(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
}  // namespace

ReasoningParser::ReasoningParser(bool opened) : state_(opened ? State::reasoning : State::start) {
  saw_reasoning_ = opened;
}

ReasoningPiece ReasoningParser::push(std::string_view delta) {
  ReasoningPiece out;
  held_ += delta;
  if (state_ == State::start) {
    size_t i = 0;
    while (i < held_.size() && blank(held_[i])) ++i;
    const std::string_view rest = std::string_view(held_).substr(i);
    if (rest.size() < kOpen.size() && kOpen.substr(0, rest.size()) == rest) return out;  // may still open
    if (rest.substr(0, kOpen.size()) == kOpen) {
      state_ = State::reasoning;
      saw_reasoning_ = true;
      held_.erase(0, i + kOpen.size());
    } else {
      state_ = State::content;
    }
  }
  if (state_ == State::reasoning) {
    const size_t close = held_.find(kClose);
    if (close == std::string::npos) {
      const size_t keep = partial_tag(held_, kClose);
      out.reasoning = held_.substr(0, held_.size() - keep);
      held_.erase(0, held_.size() - keep);
      return out;
    }
    out.reasoning = held_.substr(0, close);
    held_.erase(0, close + kClose.size());
    state_ = State::content;
  }
  out.content += held_;  // content: nothing is held back
  held_.clear();
  return out;
}

ReasoningPiece ReasoningParser::finish() {
  ReasoningPiece out;
  if (state_ == State::reasoning) out.reasoning = held_;
  else out.content = held_;
  held_.clear();
  return out;
}

ReasoningPiece split_reasoning(std::string_view text, bool opened) {
  ReasoningParser p(opened);
  ReasoningPiece a = p.push(text), b = p.finish();
  return {a.reasoning + b.reasoning, a.content + b.content};
}

bool prompt_opens_reasoning(std::string_view prompt) {
  size_t end = prompt.size();
  while (end > 0 && blank(prompt[end - 1])) --end;
  return prompt.substr(0, end).ends_with(kOpen);
}

}  // namespace llmctl::server
