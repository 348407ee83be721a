// The serving benchmark's stream reading: SSE events split anywhere by the network, and the
// OpenAI completion chunks in them turned into TTFT, ITL, TPOT and token counts.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "bench/sse.h"
#include "bench/stream_record.h"

using namespace llmctl::bench;

namespace {
std::vector<std::string> feed_in_pieces(const std::string& s, size_t piece) {
  SseParser p;
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size(); i += piece)
    for (auto& e : p.feed(std::string_view(s).substr(i, piece))) out.push_back(e);
  return out;
}
}  // namespace

TEST_CASE("SSE: events end at a blank line, whatever the chunking") {
  const std::string stream =
      ": a comment\n\n"
      "data: {\"a\":1}\n\n"
      "event: message\r\nid: 7\r\ndata: {\"b\":2}\r\n\r\n"
      "data:no-space\n\n"
      "data: line1\ndata: line2\n\n"
      "retry: 10\n\n"
      "data: [DONE]\n\n";
  const std::vector<std::string> want{"{\"a\":1}", "{\"b\":2}", "no-space", "line1\nline2", "[DONE]"};
  for (size_t piece = 1; piece <= stream.size(); ++piece) {
    CAPTURE(piece);
    CHECK(feed_in_pieces(stream, piece) == want);
  }
  SseParser p;
  CHECK(p.feed("data: partial").empty());
  CHECK(p.pending() == "data: partial");
  CHECK(p.feed("\n\n") == std::vector<std::string>{"partial"});
  CHECK(p.pending().empty());
}

TEST_CASE("stream record: TTFT, ITL, TPOT and usage from OpenAI completion chunks") {
  StreamRecord r;
  r.start = 10.0;
  r.on_data(R"({"choices":[{"index":0,"text":"","finish_reason":null}]})", 10.05);  // no text: not a token
  r.on_data(R"({"choices":[{"index":0,"text":"Hello","finish_reason":null}]})", 10.2);
  r.on_data(R"({"choices":[{"index":0,"text":" wor","finish_reason":null}]})", 10.3);
  r.on_data(R"({"choices":[{"index":0,"text":"ld","finish_reason":"length"}]})", 10.45);
  r.on_data(R"({"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":4,"total_tokens":16}})", 10.46);
  r.on_data("[DONE]", 10.47);
  r.finish(10.5);
  CHECK(r.ok());
  CHECK(r.done);
  CHECK(r.text == "Hello world");
  CHECK(r.text_chunks == 3);
  CHECK(r.output_tokens() == 4);  // the server's count wins over the chunk count
  CHECK(r.prompt_tokens == 12);
  CHECK(r.ttft() == doctest::Approx(0.2));
  REQUIRE(r.itl.size() == 2);
  CHECK(r.itl[0] == doctest::Approx(0.1));
  CHECK(r.itl[1] == doctest::Approx(0.15));
  CHECK(r.e2e() == doctest::Approx(0.5));
  CHECK(r.tpot() == doctest::Approx(0.3 / 3));
}

TEST_CASE("stream record: chat deltas, no usage, errors") {
  StreamRecord chat;
  chat.on_data(R"({"choices":[{"index":0,"delta":{"role":"assistant"}}]})", 1);
  chat.on_data(R"({"choices":[{"index":0,"delta":{"content":"Hi"}}]})", 2);
  chat.on_data(R"({"choices":[{"index":0,"delta":{"content":"!"}}]})", 3);
  chat.finish(3);
  CHECK(chat.ok());
  CHECK(chat.output_tokens() == 2);  // no usage: one token per chunk
  CHECK(chat.completion_tokens == -1);

  StreamRecord err;
  err.on_data(R"({"error":{"message":"prompt too long","type":"invalid_request_error"}})", 1);
  err.finish(1);
  CHECK_FALSE(err.ok());
  CHECK(err.error == "prompt too long");

  StreamRecord bad;
  bad.on_data("{not json", 1);
  bad.finish(1);
  CHECK(bad.error.find("malformed") != std::string::npos);

  StreamRecord empty;
  empty.finish(1);
  CHECK_FALSE(empty.ok());
}
