// The HTTP request parser of `llmctl serve`: complete requests however the bytes are split,
// pipelined requests kept apart, every limit enforced while reading (chunked bodies included),
// and the request-smuggling shapes refused.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "server/http/request_parser.h"

using namespace llmctl::server::http;

namespace {
HttpLimits small_limits() {
  HttpLimits l;
  l.max_request_line = 256;
  l.max_header_bytes = 1024;
  l.max_headers = 10;
  l.max_body_bytes = 1000;
  return l;
}

// Feeds `bytes` in pieces of `step` (0: all at once); returns the parser and what was left over.
struct Fed {
  RequestParser parser;
  std::string rest;
};
Fed feed(const std::string& bytes, size_t step = 0, HttpLimits limits = small_limits()) {
  Fed f{RequestParser(limits), ""};
  size_t pos = 0;
  std::string pending;
  while (pos < bytes.size() && f.parser.state() != RequestParser::State::complete &&
         f.parser.state() != RequestParser::State::failed) {
    const size_t n = step ? std::min(step, bytes.size() - pos) : bytes.size() - pos;
    pending += bytes.substr(pos, n);
    pos += n;
    pending.erase(0, f.parser.feed(pending));
  }
  f.rest = pending + bytes.substr(pos);
  return f;
}

int status_of(const std::string& bytes, HttpLimits limits = small_limits()) {
  Fed f = feed(bytes, 0, limits);
  return f.parser.state() == RequestParser::State::failed ? f.parser.error_status() : 0;
}
}  // namespace

TEST_CASE("a request parses the same whatever the split of its bytes") {
  const std::string body = R"({"prompt": "hello", "max_tokens": 3})";
  const std::string req = "POST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                          "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  for (size_t step : {0, 1, 2, 3, 7, 64}) {
    Fed f = feed(req, step);
    REQUIRE(f.parser.state() == RequestParser::State::complete);
    const HttpRequest r = f.parser.take();
    CHECK(r.method == "POST");
    CHECK(r.path == "/v1/completions");
    CHECK(r.query == "x=1");
    CHECK(r.header("content-type") == "application/x-www-form-urlencoded");
    CHECK(r.header("HOST") == "a");
    CHECK(r.body == body);  // whatever the content type says, the body is kept whole
    CHECK(f.rest.empty());
  }
}

TEST_CASE("chunked bodies are decoded, split anywhere, trailers skipped") {
  const std::string req = "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                          "5;ext=1\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nX-Trailer: y\r\n\r\n";
  for (size_t step : {0, 1, 3, 5}) {
    Fed f = feed(req, step);
    REQUIRE(f.parser.state() == RequestParser::State::complete);
    CHECK(f.parser.take().body == "hello 0123456789");
  }
}

TEST_CASE("pipelined requests stay apart and are answered in order") {
  std::string two = "GET /health HTTP/1.1\r\n\r\nPOST /tokenize HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}GET /a";
  RequestParser p(small_limits());
  size_t used = p.feed(two);
  REQUIRE(p.state() == RequestParser::State::complete);
  CHECK(p.take().path == "/health");
  two.erase(0, used);
  used = p.feed(two);
  REQUIRE(p.state() == RequestParser::State::complete);
  const HttpRequest second = p.take();
  CHECK(second.path == "/tokenize");
  CHECK(second.body == "{}");
  two.erase(0, used);
  p.feed(two);
  CHECK(p.state() == RequestParser::State::head);  // the third is still arriving
}

TEST_CASE("keep-alive follows the version and Connection") {
  auto keep = [](const std::string& head) {
    Fed f = feed(head + "\r\n");
    REQUIRE(f.parser.state() == RequestParser::State::complete);
    return f.parser.keep_alive();
  };
  CHECK(keep("GET / HTTP/1.1\r\n"));
  CHECK_FALSE(keep("GET / HTTP/1.1\r\nConnection: close\r\n"));
  CHECK_FALSE(keep("GET / HTTP/1.0\r\n"));
  CHECK(keep("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n"));
}

TEST_CASE("Expect: 100-continue is noticed once the head is in") {
  Fed f = feed("POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
  CHECK(f.parser.state() == RequestParser::State::body);
  CHECK(f.parser.expects_continue());
  CHECK(status_of("POST / HTTP/1.1\r\nExpect: something-else\r\nContent-Length: 5\r\n\r\n") == 417);
}

TEST_CASE("an HTTP/1.0 client's Expect: 100-continue is ignored: no 1xx goes to it") {
  Fed f = feed("POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
  CHECK(f.parser.state() == RequestParser::State::body);
  CHECK_FALSE(f.parser.expects_continue());
  // Nor is a 100 due without a body.
  CHECK_FALSE(feed("POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n").parser.expects_continue());
}

TEST_CASE("trailer lines are field lines: checked, bounded, and ended by the blank line") {
  const std::string chunked = "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n";
  const std::string next = "GET /health HTTP/1.1\r\n\r\n";
  // Valid trailers are dropped; what follows the blank line is the next request, however split.
  for (size_t step : {0, 1, 4}) {
    Fed f = feed(chunked + "X-Sum: 1\r\nX-Other:\r\n\r\n" + next, step);
    REQUIRE(f.parser.state() == RequestParser::State::complete);
    const HttpRequest r = f.parser.take();
    CHECK(r.body == "hi");
    CHECK_FALSE(r.has_header("x-sum"));
    CHECK(f.rest == next);
  }
  // A request line where a trailer field belongs (the blank line left out) is refused, not swallowed.
  for (size_t step : {0, 3}) {
    Fed f = feed(chunked + next, step);
    CHECK(f.parser.state() == RequestParser::State::failed);
    CHECK(f.parser.error_status() == 400);
    CHECK(f.parser.error_message().find("trailer") != std::string::npos);
  }
  CHECK(status_of(chunked + "X-A: 1\r\n folded\r\n\r\n") == 400);
  CHECK(status_of(chunked + "Bad Name: 1\r\n\r\n") == 400);
  CHECK(status_of(chunked + ": no name\r\n\r\n") == 400);
  const char nul[] = "X-A: a\0b\r\n\r\n";
  CHECK(status_of(chunked + std::string(nul, sizeof nul - 1)) == 400);
  // Bounded: more fields than max_headers, or more bytes than max_header_bytes.
  std::string many = chunked;
  for (int i = 0; i < 11; ++i) many += "X-" + std::to_string(i) + ": 1\r\n";
  CHECK(status_of(many + "\r\n") == 431);
  CHECK(status_of(chunked + "X-Big: " + std::string(2000, 'a') + "\r\n\r\n") == 431);
}

TEST_CASE("limits are enforced while reading") {
  const HttpLimits l = small_limits();
  // A body over the limit is refused on its Content-Length, before any of it is read.
  CHECK(status_of("POST / HTTP/1.1\r\nContent-Length: 1001\r\n\r\n") == 413);
  CHECK(status_of("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n") == 413);
  // A chunked body is counted chunk by chunk: the chunk that would cross the limit is refused.
  std::string chunked = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 3; ++i) chunked += "190\r\n" + std::string(400, 'a') + "\r\n";
  Fed f = feed(chunked, 7);
  CHECK(f.parser.state() == RequestParser::State::failed);
  CHECK(f.parser.error_status() == 413);
  CHECK(f.rest.size() > 300);  // refused before the third chunk was taken
  CHECK(status_of("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFF\r\n") == 400);
  // Head size, header count, request line.
  CHECK(status_of("GET /" + std::string(300, 'a') + " HTTP/1.1\r\n\r\n") == 414);
  CHECK(status_of("GET / HTTP/1.1\r\nX: " + std::string(2000, 'a') + "\r\n\r\n") == 431);
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 11; ++i) many += "X-" + std::to_string(i) + ": 1\r\n";
  CHECK(status_of(many + "\r\n") == 431);
  // A head that never ends is refused once it passes the limit, not buffered without bound.
  Fed endless = feed("GET / HTTP/1.1\r\n" + std::string(5000, 'x'), 100, l);
  CHECK(endless.parser.state() == RequestParser::State::failed);
  CHECK(endless.parser.error_status() == 431);
}

TEST_CASE("smuggling and malformed shapes are refused") {
  CHECK(status_of("POST / HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n") == 400);
  CHECK(status_of("POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n") == 400);
  CHECK(status_of("POST / HTTP/1.1\r\nContent-Length: 2, 3\r\n\r\n") == 400);
  CHECK(status_of("POST / HTTP/1.1\r\nContent-Length: -5\r\n\r\n") == 400);
  CHECK(status_of("POST / HTTP/1.1\r\nContent-Length: 0x10\r\n\r\n") == 400);
  CHECK(status_of("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n") == 501);
  CHECK(status_of("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n") == 400);
  CHECK(status_of("GET / HTTP/1.1\r\nX: a\r\n folded\r\n\r\n") == 400);
  CHECK(status_of("GET / HTTP/1.1\r\nBad Name: a\r\n\r\n") == 400);
  CHECK(status_of("GET / HTTP/1.1\r\nNoColon\r\n\r\n") == 400);
  CHECK(status_of("GET / HTTP/2.0\r\n\r\n") == 505);
  CHECK(status_of("GET /\r\n\r\n") == 400);
  CHECK(status_of("GET  / HTTP/1.1\r\n\r\n") == 400);
  CHECK(status_of("GET http://host/ HTTP/1.1\r\n\r\n") == 400);
  CHECK(status_of("GE\x01T / HTTP/1.1\r\n\r\n") == 400);
  const char nul[] = "GET / HTTP/1.1\r\nX: a\0b\r\n\r\n";
  CHECK(status_of(std::string(nul, sizeof nul - 1)) == 400);
  CHECK(status_of("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n") == 400);
  CHECK(status_of("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n") == 400);
}

TEST_CASE("random bytes never crash the parser and always end in a definite state") {
  std::mt19937 rng(12);
  const std::string alphabet = "GETPOST /:\r\n0123456789abcdefHTTP/1.1 Content-Length: Transfer-Encoding: chunked;";
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes;
    const size_t n = rng() % 400;
    for (size_t i = 0; i < n; ++i) bytes += rng() % 4 ? alphabet[rng() % alphabet.size()] : char(rng() % 256);
    Fed f = feed(bytes, 1 + rng() % 17);
    const auto st = f.parser.state();
    if (st == RequestParser::State::failed) CHECK(f.parser.error_status() >= 400);
    if (st == RequestParser::State::complete) CHECK(f.parser.take().body.size() <= 1000);
  }
}
