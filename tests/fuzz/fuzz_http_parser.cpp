// HTTP/1.1 request parser, driven as the server's I/O thread drives it: bytes arrive in pieces
// (sizes from the input's first bytes), unconsumed bytes stay buffered for the next feed, a
// complete request is taken and parsing goes on with the rest (pipelining) until the data ends or
// the parser fails. Byte 0 picks small or default limits; bytes 1-4 the piece sizes.
#include <cstdint>
#include <string>

#include "server/http/request_parser.h"
#include "tests/fuzz/fuzz_util.h"

using namespace llmctl::fuzz;
using namespace llmctl::server::http;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in(data, size);
  const uint8_t mode = in.u8();
  uint8_t steps[4];
  for (auto& s : steps) s = in.u8();
  HttpLimits limits;
  if (mode & 1) {
    limits.max_request_line = 64;
    limits.max_header_bytes = 256;
    limits.max_headers = 8;
    limits.max_body_bytes = 512;
  }
  const std::string_view stream = in.rest();

  RequestParser parser(limits);
  std::string pending;
  size_t pos = 0, piece = 0;
  while (true) {
    // Parse what is buffered, taking every complete request (pipelined ones follow).
    while (true) {
      const size_t used = parser.feed(pending);
      if (used > pending.size()) __builtin_trap();
      pending.erase(0, used);
      if (parser.state() == RequestParser::State::complete) {
        const bool keep_alive = parser.keep_alive();
        HttpRequest r = parser.take();
        if (r.body.size() > limits.max_body_bytes) __builtin_trap();
        if (r.headers.size() > limits.max_headers) __builtin_trap();
        (void)r.header("content-type");
        if (!keep_alive) return 0;  // the server closes the connection after the response
        continue;
      }
      break;
    }
    if (parser.state() == RequestParser::State::failed) {
      const int st = parser.error_status();
      if (st < 400 || st > 599 || parser.error_message().empty()) __builtin_trap();
      return 0;
    }
    if (pos >= stream.size()) return 0;
    const size_t n = std::min<size_t>(size_t(steps[piece++ % 4]) + 1, stream.size() - pos);
    pending.append(stream.substr(pos, n));
    pos += n;
  }
}
