// server/reasoning_parser.h: <think> blocks split off the content, whole and streamed in every
// possible cut of the text (a tag split over deltas included).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "server/reasoning_parser.h"

using namespace llmctl::server;

namespace {
// The text streamed as deltas cut at `cuts`, joined back per field.
ReasoningPiece streamed(const std::string& text, const std::vector<size_t>& cuts, bool opened) {
  ReasoningParser p(opened);
  ReasoningPiece all;
  size_t at = 0;
  for (size_t c : cuts) {
    ReasoningPiece d = p.push(std::string_view(text).substr(at, c - at));
    all.reasoning += d.reasoning, all.content += d.content;
    at = c;
  }
  ReasoningPiece d = p.push(std::string_view(text).substr(at));
  ReasoningPiece f = p.finish();
  all.reasoning += d.reasoning + f.reasoning, all.content += d.content + f.content;
  return all;
}
}  // namespace

TEST_CASE("reasoning parser: whole outputs") {
  auto s = split_reasoning("<think>Let me see.</think>\n\nThe answer is 4.");
  CHECK(s.reasoning == "Let me see.");
  CHECK(s.content == "\n\nThe answer is 4.");
  s = split_reasoning("Just an answer with </think> in it.");  // no block opened: all content
  CHECK(s.reasoning.empty());
  CHECK(s.content == "Just an answer with </think> in it.");
  s = split_reasoning("thinking on</think>done", true);  // the prompt opened the block
  CHECK(s.reasoning == "thinking on");
  CHECK(s.content == "done");
  s = split_reasoning("<think>cut off by max_tokens");
  CHECK(s.reasoning == "cut off by max_tokens");
  CHECK(s.content.empty());
  s = split_reasoning("<thin");  // ends while it could still be a tag: content
  CHECK(s.content == "<thin");
  CHECK(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
  CHECK_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n"));
}

TEST_CASE("reasoning parser: every cut of a streamed output gives the whole split") {
  const std::vector<std::pair<std::string, bool>> texts = {
      {"<think>a<b</thin</think>c</think>d", false}, {"  <think>x</think>", false}, {"plain <think> text", false},
      {"r1 style</think>answer", true}, {"<th", false}};
  for (const auto& [text, opened] : texts) {
    const ReasoningPiece whole = split_reasoning(text, opened);
    for (size_t i = 0; i <= text.size(); ++i)
      for (size_t j = i; j <= text.size(); ++j) {
        const ReasoningPiece s = streamed(text, {i, j}, opened);
        CHECK_MESSAGE(s.reasoning == whole.reasoning, text << " cut at " << i << "," << j);
        CHECK_MESSAGE(s.content == whole.content, text << " cut at " << i << "," << j);
      }
  }
  const ReasoningPiece s = split_reasoning("<think>a<b</thin</think>c</think>d");
  CHECK(s.reasoning == "a<b</thin");
  CHECK(s.content == "c</think>d");
}
