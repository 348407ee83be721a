#include "server/http/socket_io.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstdio>

namespace llmctl::server::http {

bool send_all(int fd, std::string_view data, double timeout_s) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(size_t(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      const int r = ::poll(&p, 1, int(timeout_s * 1000));
      if (r <= 0 || (p.revents & (POLLERR | POLLHUP | POLLNVAL))) return false;
      continue;
    }
    return false;
  }
  return true;
}

bool send_now(int fd, std::string_view data) {
  const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  return n == ssize_t(data.size());
}

std::string response_head(const HttpResponse& res, int minor_version, bool keep_alive, long long content_length) {
  std::string h = "HTTP/1." + std::to_string(minor_version) + " " + std::to_string(res.status) + " " +
                  status_text(res.status) + "\r\n";
  for (const auto& [k, v] : res.headers) h += k + ": " + v + "\r\n";
  if (content_length >= 0)
    h += "Content-Length: " + std::to_string(content_length) + "\r\n";
  else if (minor_version >= 1)
    h += "Transfer-Encoding: chunked\r\n";
  if (!keep_alive)
    h += "Connection: close\r\n";
  else if (minor_version == 0)
    h += "Connection: keep-alive\r\n";
  return h + "\r\n";
}

bool HangupCheck::client_gone() {
  pollfd p{fd_, short(POLLRDHUP), 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return true;  // reset, or both directions shut
  if (!(p.revents & POLLRDHUP) || !http11_ || probed_) return false;
  probed_ = true;
  return !send_now(fd_, "HTTP/1.1 102 Processing\r\n\r\n");
}

bool SocketSink::write(std::string_view data) {
  if (failed_ || done_) return false;
  if (data.empty()) return true;  // an empty chunk would end the stream
  bool ok;
  if (chunked_) {
    char size[24];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    std::string frame = size;
    frame.append(data);
    frame += "\r\n";
    ok = send_all(fd_, frame, timeout_s_);
  } else {
    ok = send_all(fd_, data, timeout_s_);
  }
  failed_ = !ok;
  return ok;
}

void SocketSink::done() {
  if (done_ || failed_) return;
  done_ = true;
  if (chunked_ && !send_all(fd_, "0\r\n\r\n", timeout_s_)) failed_ = true;
}

}  // namespace llmctl::server::http
