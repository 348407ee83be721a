// RequestParser: HTTP/1.1 requests from a byte stream, incrementally and within HttpLimits. The
// I/O thread feeds it whatever arrived; it consumes what it can and says whether a request is
// complete. States: head (request line + headers) -> body (Content-Length or chunked) -> complete;
// any state -> failed (status + message; the connection is answered and closed). A chunked body
// ends at the blank line after its trailer fields, each checked as a header line is (and dropped),
// so a request pipelined without that blank line is refused, not swallowed. Everything that
// could be used to smuggle or confuse is refused: Content-Length together with Transfer-Encoding,
// differing Content-Lengths, transfer codings other than chunked, obsolete line folding.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "server/http/http_types.h"

namespace llmctl::server::http {

class RequestParser {
 public:
  enum class State { head, body, complete, failed };

  explicit RequestParser(HttpLimits limits) : limits_(limits) {}

  // Consumes a prefix of `data`; returns how many bytes it used (the rest belongs to a later call:
  // more of the head, or the next pipelined request once this one is complete).
  size_t feed(std::string_view data);

  State state() const { return state_; }
  // Once the head is parsed: the request so far (no body yet while state() == body).
  const HttpRequest& request() const { return req_; }
  // An HTTP/1.1 client sent `Expect: 100-continue` and a body is due: the server answers 100 first
  // (an HTTP/1.0 client's expectation is ignored: no 1xx goes to it).
  bool expects_continue() const { return expect_continue_; }
  bool keep_alive() const { return keep_alive_; }
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_; }

  // Hands over the complete request and resets for the next one on the same connection.
  HttpRequest take();

 private:
  size_t feed_head(std::string_view data);
  size_t feed_chunked(std::string_view data);
  void parse_head(std::string_view head);
  bool parse_request_line(std::string_view line);
  void interpret_headers();
  size_t fail(int status, std::string message);

  enum class Chunk { size, data, data_end, trailer };

  HttpLimits limits_;
  State state_ = State::head;
  HttpRequest req_;
  std::string head_;          // bytes of the head collected so far
  size_t scanned_ = 0;        // head_ bytes already searched for the blank line
  uint64_t content_left_ = 0; // Content-Length bytes still due
  bool chunked_ = false, expect_continue_ = false, keep_alive_ = true;
  Chunk chunk_state_ = Chunk::size;
  std::string line_;          // a chunk-size or trailer line in progress
  uint64_t chunk_left_ = 0;
  size_t trailer_bytes_ = 0, trailer_fields_ = 0;
  int error_status_ = 0;
  std::string error_;
};

}  // namespace llmctl::server::http
