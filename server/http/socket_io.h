// Socket helpers of the HTTP layer: bounded writes on non-blocking sockets, the head of a response,
// chunked framing for streams, and the hang-up check.
#pragma once
#include <string>
#include <string_view>

#include "server/http/http_types.h"

namespace llmctl::server::http {

// Writes all of `data`, waiting for the socket at most `timeout_s` without progress. False when
// the peer is gone or stalled.
bool send_all(int fd, std::string_view data, double timeout_s);

// One attempt without waiting (for short answers from the I/O thread); false if not all was sent.
bool send_now(int fd, std::string_view data);

// "HTTP/1.1 200 OK\r\n" + the response's headers + framing headers + "\r\n".
// content_length < 0: a chunked (HTTP/1.1) or close-delimited (HTTP/1.0) stream follows.
std::string response_head(const HttpResponse& res, int minor_version, bool keep_alive, long long content_length);

// Whether the client of a non-streamed request has left, asked while its answer is being made.
// A FIN alone (POLLRDHUP) may be a half-close: the client shut its write side and still reads
// (`nc -N`, some proxies), so it is not taken for a hang-up. An HTTP/1.1 client is then sent one
// interim "102 Processing" (RFC 9110 15.2: 1.1 clients must read unexpected 1xx): a client that
// closed both sides answers it with a reset, which a later check sees as POLLHUP/POLLERR. HTTP/1.0
// forbids 1xx: a half-closed 1.0 client is only known gone when the final write fails.
class HangupCheck {
 public:
  HangupCheck(int fd, int minor_version) : fd_(fd), http11_(minor_version >= 1) {}
  bool client_gone();

 private:
  int fd_;
  bool http11_;
  bool probed_ = false;
};

// StreamSink over a socket, framing each write as one chunk (or raw for HTTP/1.0).
class SocketSink : public StreamSink {
 public:
  SocketSink(int fd, bool chunked, double timeout_s) : fd_(fd), chunked_(chunked), timeout_s_(timeout_s) {}
  bool write(std::string_view data) override;
  void done() override;
  bool is_done() const { return done_; }
  bool failed() const { return failed_; }

 private:
  int fd_;
  bool chunked_;
  double timeout_s_;
  bool done_ = false, failed_ = false;
};

}  // namespace llmctl::server::http
