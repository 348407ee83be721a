// The HTTP/1.1 layer of `llmctl serve`: what a route handler sees and fills in. The layer is ours
// (not cpp-httplib's server) so that every byte a client sends is bounded before any worker
// thread is held: request line, headers and body (chunked too) are read by one I/O thread under
// size limits and deadlines, the API key is checked on the headers, and only complete requests
// reach the worker pool. Pipelined requests on a connection are answered in order.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace llmctl::server::http {

struct HttpLimits {
  size_t max_request_line = 8 << 10;   // 414 beyond (the line with method and target)
  size_t max_header_bytes = 16 << 10;  // request line + headers; 431 beyond
  size_t max_headers = 100;            // 431 beyond
  size_t max_body_bytes = 4 << 20;     // 413 beyond, chunked bodies included (counted while read)
};

struct HttpRequest {
  std::string method, target, path, query;  // target = path[?query]
  int minor_version = 1;                     // HTTP/1.<minor>
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, in order
  std::string body;                                          // de-chunked
  std::string remote_addr;

  // The value of a header (name in any case), "" when absent.
  std::string header(std::string_view name) const;
  bool has_header(std::string_view name) const;
  // True once the client has left: a reset, or both directions closed (set by the server, see
  // HangupCheck: a half-close alone is not leaving). Handlers that wait long poll it to abort work
  // nobody will read.
  std::function<bool()> client_gone = [] { return false; };
};

// Where a streamed response writes. write() returns false once the client is gone.
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  virtual bool write(std::string_view data) = 0;
  virtual void done() = 0;  // the stream is complete; the provider is not called again
};

struct HttpResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  void set_header(std::string name, std::string value) { headers.emplace_back(std::move(name), std::move(value)); }
  // Replaces the body and its Content-Type (other headers, e.g. Retry-After, stay).
  void set_content(std::string content, const std::string& content_type) {
    body = std::move(content);
    std::erase_if(headers, [](const auto& h) { return h.first == "Content-Type"; });
    set_header("Content-Type", content_type);
  }
  // A streamed body (chunked transfer encoding): `provider` is called until it returns false (abort,
  // the connection is closed) or calls sink.done(); `closed(completed)` runs once at the end.
  void set_stream(const std::string& content_type, std::function<bool(StreamSink&)> provider,
                  std::function<void(bool completed)> closed) {
    set_header("Content-Type", content_type);
    stream = std::move(provider);
    stream_closed = std::move(closed);
  }
  std::function<bool(StreamSink&)> stream;
  std::function<void(bool)> stream_closed;
};

const char* status_text(int status);

}  // namespace llmctl::server::http
