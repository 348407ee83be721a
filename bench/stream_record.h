// One streamed completion as the benchmark client sees it: the SSE data payloads of an OpenAI
// /v1/completions (or /v1/chat/completions) stream, each with its arrival time, turned into the
// figures of that request. Pure: no I/O, so it is unit-tested on recorded streams.
//
//   ttft   first chunk carrying text - start
//   itl    gaps between successive chunks carrying text
//   e2e    end of the stream - start
//   output tokens: the server's usage.completion_tokens when it sends usage, else chunks with text
//   tpot   (e2e - ttft) / (output tokens - 1), when more than one token
#pragma once
#include <string>
#include <vector>

namespace llmctl::bench {

struct StreamRecord {
  double start = 0;             // when the request was sent (seconds, any clock)
  double first = -1, last = -1;  // first and latest text chunk
  double end = 0;               // stream closed
  std::vector<double> itl;
  int text_chunks = 0;
  int prompt_tokens = -1, completion_tokens = -1;  // from usage; -1 = not given
  bool done = false;            // saw "data: [DONE]"
  std::string error;            // non-empty: the request failed (HTTP status, error event, no tokens)
  std::string text;             // the generated text

  // One SSE data payload that arrived at time t. Malformed JSON sets error.
  void on_data(const std::string& data, double t);
  void finish(double t);  // stream ended (sets error when nothing was generated)

  bool ok() const { return error.empty(); }
  int output_tokens() const { return completion_tokens >= 0 ? completion_tokens : text_chunks; }
  double ttft() const { return first - start; }
  double e2e() const { return end - start; }
  double tpot() const;  // 0 when one token or fewer
};

}  // namespace llmctl::bench
