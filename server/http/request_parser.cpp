#include "server/http/request_parser.h"

#include <algorithm>
#include <cctype>
#include <new>

namespace llmctl::server::http {

namespace {
bool is_tchar(char c) {  // RFC 9110 token characters
  return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}
bool is_token(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_tchar); }

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool is_digits(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}
bool is_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
}

// Why `line` (CR removed) is not a field line "name: value" (RFC 9112 5), or nullptr.
const char* field_line_error(std::string_view line) {
  if (line.front() == ' ' || line.front() == '\t') return "obsolete header line folding is not accepted";
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos || !is_token(line.substr(0, colon))) return "malformed header line";
  const std::string_view value = line.substr(colon + 1);
  if (std::any_of(value.begin(), value.end(), [](char c) { return c == '\0' || c == '\r' || c == '\n'; }))
    return "a header value holds a control character";
  return nullptr;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Splits a comma-separated header value into trimmed, lower-cased, non-empty items.
std::vector<std::string> list_items(std::string_view v) {
  std::vector<std::string> out;
  while (!v.empty()) {
    const size_t comma = v.find(',');
    const std::string_view item = trim(v.substr(0, comma));
    if (!item.empty()) out.push_back(lower(item));
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
  return out;
}
}  // namespace

std::string HttpRequest::header(std::string_view name) const {
  const std::string key = lower(name);
  for (const auto& [k, v] : headers)
    if (k == key) return v;
  return {};
}

bool HttpRequest::has_header(std::string_view name) const {
  const std::string key = lower(name);
  return std::any_of(headers.begin(), headers.end(), [&](const auto& h) { return h.first == key; });
}

size_t RequestParser::fail(int status, std::string message) {
  state_ = State::failed;
  error_status_ = status;
  error_ = std::move(message);
  return 0;
}

size_t RequestParser::feed(std::string_view data) {
  size_t used = 0;
  while (used < data.size() && (state_ == State::head || state_ == State::body)) {
    const std::string_view rest = data.substr(used);
    if (state_ == State::head) {
      used += feed_head(rest);
    } else if (chunked_) {
      used += feed_chunked(rest);
    } else {
      const size_t n = size_t(std::min<uint64_t>(content_left_, rest.size()));
      req_.body.append(rest.substr(0, n));
      content_left_ -= n;
      used += n;
      if (content_left_ == 0) state_ = State::complete;
    }
  }
  return used;
}

size_t RequestParser::feed_head(std::string_view data) {
  size_t used = 0;
  if (head_.empty())  // blank lines before a request line are ignored (RFC 9112 2.2)
    while (used < data.size() && (data[used] == '\r' || data[used] == '\n')) ++used;
  if (used == data.size()) return used;
  // Take no more than the limit allows (+4 so a head of exactly the limit is still recognized).
  const size_t room = limits_.max_header_bytes + 4 - std::min(head_.size(), limits_.max_header_bytes + 4);
  const size_t take = std::min(room, data.size() - used);
  head_.append(data.substr(used, take));
  used += take;
  size_t end = std::string::npos;
  for (size_t i = std::max<size_t>(scanned_, 1); i < head_.size(); ++i) {
    if (head_[i] != '\n') continue;
    if (head_[i - 1] == '\n' || (head_[i - 1] == '\r' && i >= 2 && head_[i - 2] == '\n')) {
      end = i + 1;
      break;
    }
  }
  if (end == std::string::npos) {
    scanned_ = head_.size();
    const size_t first_line = head_.find('\n');
    if ((first_line == std::string::npos ? head_.size() : first_line) > limits_.max_request_line)
      return fail(414, "the request line is longer than " + std::to_string(limits_.max_request_line) + " bytes");
    if (head_.size() > limits_.max_header_bytes)
      return fail(431, "the request headers are larger than " + std::to_string(limits_.max_header_bytes) + " bytes");
    return used;
  }
  used -= head_.size() - end;  // bytes after the blank line belong to the body or the next request
  head_.resize(end);
  if (head_.size() > limits_.max_header_bytes)
    return fail(431, "the request headers are larger than " + std::to_string(limits_.max_header_bytes) + " bytes");
  parse_head(head_);
  return state_ == State::failed ? 0 : used;
}

bool RequestParser::parse_request_line(std::string_view line) {
  if (line.size() > limits_.max_request_line) {
    fail(414, "the request line is longer than " + std::to_string(limits_.max_request_line) + " bytes");
    return false;
  }
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    fail(400, "malformed request line");
    return false;
  }
  const std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1),
                         version = line.substr(sp2 + 1);
  if (!is_token(method) || method.size() > 32) {
    fail(400, "malformed request method");
    return false;
  }
  if (target.empty() || target.front() != '/' ||
      std::any_of(target.begin(), target.end(), [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; })) {
    fail(400, "malformed request target (an absolute path is expected)");
    return false;
  }
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    fail(version.substr(0, 5) == "HTTP/" ? 505 : 400, "only HTTP/1.0 and HTTP/1.1 are supported");
    return false;
  }
  req_.method = std::string(method);
  req_.target = std::string(target);
  const size_t q = target.find('?');
  req_.path = std::string(target.substr(0, q));
  req_.query = q == std::string_view::npos ? "" : std::string(target.substr(q + 1));
  req_.minor_version = version.back() - '0';
  return true;
}

void RequestParser::parse_head(std::string_view head) {
  bool first = true;
  while (!head.empty()) {
    const size_t nl = head.find('\n');
    std::string_view line = head.substr(0, nl);
    head.remove_prefix(nl == std::string_view::npos ? head.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (first) {
      if (!parse_request_line(line)) return;
      first = false;
      continue;
    }
    if (line.empty()) break;  // the blank line ending the head
    if (const char* error = field_line_error(line)) {
      fail(400, error);
      return;
    }
    const size_t colon = line.find(':');
    const std::string_view value = trim(line.substr(colon + 1));
    if (req_.headers.size() >= limits_.max_headers) {
      fail(431, "more than " + std::to_string(limits_.max_headers) + " request headers");
      return;
    }
    req_.headers.emplace_back(lower(line.substr(0, colon)), std::string(value));
  }
  interpret_headers();
}

void RequestParser::interpret_headers() {
  std::vector<std::string> codings, lengths, connection;
  bool has_te = false, has_cl = false;
  for (const auto& [name, value] : req_.headers) {
    if (name == "transfer-encoding") {
      has_te = true;
      for (auto& c : list_items(value)) codings.push_back(std::move(c));
    } else if (name == "content-length") {
      has_cl = true;
      for (auto& l : list_items(value)) lengths.push_back(std::move(l));
    } else if (name == "connection") {
      for (auto& c : list_items(value)) connection.push_back(std::move(c));
    }
  }
  const auto has = [](const std::vector<std::string>& v, const char* s) { return std::find(v.begin(), v.end(), s) != v.end(); };
  keep_alive_ = req_.minor_version >= 1 ? !has(connection, "close") : has(connection, "keep-alive");

  bool body_due = false;
  if (has_te) {
    if (has_cl) {
      fail(400, "a request may not carry both Content-Length and Transfer-Encoding");
      return;
    }
    if (req_.minor_version == 0) {
      fail(400, "Transfer-Encoding is not valid in HTTP/1.0");
      return;
    }
    if (codings != std::vector<std::string>{"chunked"}) {
      fail(501, "only the 'chunked' transfer coding is supported");
      return;
    }
    chunked_ = true;
    body_due = true;
  } else if (has_cl) {
    if (lengths.empty() || std::any_of(lengths.begin(), lengths.end(), [&](const std::string& l) { return l != lengths[0]; })) {
      fail(400, "conflicting Content-Length values");
      return;
    }
    const std::string& l = lengths[0];
    if (l.size() > 18 || !is_digits(l)) {
      if (is_digits(l))
        fail(413, "the request body (" + l + " bytes) is over the server's limit of " +
                      std::to_string(limits_.max_body_bytes) + " bytes");
      else
        fail(400, "malformed Content-Length");
      return;
    }
    content_left_ = std::stoull(l);
    if (content_left_ > limits_.max_body_bytes) {
      fail(413, "the request body (" + l + " bytes) is over the server's limit of " +
                    std::to_string(limits_.max_body_bytes) + " bytes");
      return;
    }
    body_due = content_left_ > 0;
    // One allocation for the whole body, not a doubling series (whose last copy holds 1.5x the body):
    // address space only until the bytes arrive; where even that is refused, the body grows as it comes.
    try {
      req_.body.reserve(size_t(content_left_));
    } catch (const std::bad_alloc&) {
    }
  }
  const std::string expect = lower(req_.header("expect"));
  if (!expect.empty()) {
    if (expect != "100-continue") {
      fail(417, "only 'Expect: 100-continue' is supported");
      return;
    }
    // RFC 9110 10.1.1: an HTTP/1.0 client is sent no 1xx; its expectation is ignored.
    expect_continue_ = body_due && req_.minor_version >= 1;
  }
  state_ = body_due ? State::body : State::complete;
}

size_t RequestParser::feed_chunked(std::string_view data) {
  size_t used = 0;
  // A chunk-size line, the CRLF after a chunk or a trailer line: collected whole, bounded.
  auto take_line = [&](size_t max_len) -> bool {
    while (used < data.size()) {
      const char c = data[used++];
      if (c == '\n') return true;
      line_ += c;
      if (line_.size() > max_len) return false;
    }
    return false;
  };
  while (used < data.size() && state_ == State::body) {
    if (chunk_state_ == Chunk::data) {
      const size_t n = size_t(std::min<uint64_t>(chunk_left_, data.size() - used));
      req_.body.append(data.substr(used, n));
      used += n;
      chunk_left_ -= n;
      if (chunk_left_ == 0) chunk_state_ = Chunk::data_end;
      continue;
    }
    const size_t max_len = chunk_state_ == Chunk::trailer ? limits_.max_header_bytes : 1024;
    const size_t before = used;
    const bool got = take_line(max_len);
    if (chunk_state_ == Chunk::trailer) trailer_bytes_ += used - before;
    if (line_.size() > max_len || trailer_bytes_ > limits_.max_header_bytes)
      return fail(chunk_state_ == Chunk::trailer ? 431 : 400, "a chunk-size or trailer line is too long");
    if (!got) break;
    std::string_view line = line_;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (chunk_state_ == Chunk::size) {
      const std::string_view digits = trim(line.substr(0, line.find(';')));
      if (digits.empty() || digits.size() > 15 || !is_hex(digits))
        return fail(400, "malformed chunk size");
      chunk_left_ = std::stoull(std::string(digits), nullptr, 16);
      if (req_.body.size() + chunk_left_ > limits_.max_body_bytes)
        return fail(413, "the request body is over the server's limit of " + std::to_string(limits_.max_body_bytes) + " bytes");
      chunk_state_ = chunk_left_ == 0 ? Chunk::trailer : Chunk::data;
    } else if (chunk_state_ == Chunk::data_end) {
      if (!line.empty()) return fail(400, "a chunk is longer than its size");
      chunk_state_ = Chunk::size;
    } else if (line.empty()) {  // the blank line after the trailers ends the body
      state_ = State::complete;
    } else {  // a trailer field, checked as a header line is (a request line here is an error), then dropped
      if (const char* error = field_line_error(line)) return fail(400, std::string("chunked body trailer: ") + error);
      if (++trailer_fields_ > limits_.max_headers)
        return fail(431, "more than " + std::to_string(limits_.max_headers) + " trailer fields");
    }
    line_.clear();
  }
  return used;
}

HttpRequest RequestParser::take() {
  HttpRequest out = std::move(req_);
  const HttpLimits limits = limits_;
  *this = RequestParser(limits);
  return out;
}

const char* status_text(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 499: return "Client Closed Request";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return status < 500 ? "Bad Request" : "Internal Server Error";
  }
}

}  // namespace llmctl::server::http
