#include "server/http/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

#include "server/http/request_parser.h"
#include "server/http/socket_io.h"

namespace llmctl::server::http {

namespace {
using Clock = std::chrono::steady_clock;

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

std::string peer_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  char buf[INET6_ADDRSTRLEN] = {};
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return {};
  if (ss.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in&>(ss).sin_addr, buf, sizeof buf);
  else if (ss.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6&>(ss).sin6_addr, buf, sizeof buf);
  return buf;
}
}  // namespace

struct Server::Conn {
  enum class Phase { idle, head, body };  // idle: between requests (no byte of the next one yet)
  explicit Conn(int fd_, const HttpLimits& limits) : fd(fd_), parser(limits) {}
  int fd;
  std::string remote;
  std::string in;  // received bytes the parser has not consumed (a pipelined request's)
  RequestParser parser;
  Phase phase = Phase::idle;
  Clock::time_point deadline;
  bool prechecked = false, continue_sent = false, keep_alive = true;
  bool eof = false;  // the peer has shut down its side: what is buffered is answered, then closed
};

Server::Server(ServerOptions options) : opt_(std::move(options)) {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

Server::~Server() {
  stop();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void Server::route(const std::string& method, const std::string& path, Handler handler) {
  routes_[path][method] = std::move(handler);
}

int Server::bind(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) return -1;
  for (addrinfo* a = res; a && listen_fd_ < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, opt_.backlog) == 0)
      listen_fd_ = fd;
    else
      ::close(fd);
  }
  freeaddrinfo(res);
  if (listen_fd_ < 0) return -1;
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len);
  return ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(ss).sin6_port
                                        : reinterpret_cast<sockaddr_in&>(ss).sin_port);
}

void Server::wake() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void Server::stop() {
  {
    std::lock_guard lock(mu_);  // a worker between its check and its wait cannot miss the flag
    stopping_ = true;
  }
  if (wake_fd_ >= 0) wake();
  work_cv_.notify_all();
}

void Server::run() {
  for (int i = 0; i < opt_.workers; ++i) workers_.emplace_back([this] { worker_loop(); });
  io_loop();
  stop();  // the loop also ends when poll() fails: the workers finish what is queued and leave
  for (auto& w : workers_) w.join();
  workers_.clear();
  for (auto& job : queue_) close_conn(*job.conn);  // queued after the workers left
  queue_.clear();
  for (auto& c : returned_) close_conn(*c);
  returned_.clear();
}

HttpResponse Server::error_response(int status, const std::string& message) const {
  HttpResponse res;
  res.status = status;
  res.set_content(error_body_ ? error_body_(status, message) : message, "application/json");
  return res;
}

void Server::close_conn(Conn& c) {
  if (c.fd < 0) return;
  ::close(c.fd);
  c.fd = -1;
  --open_conns_;
}

// An answer from the I/O thread (parse error, 401, 408, 413, 503): short, written without
// waiting, and the connection closed (its unread bytes make it unusable).
void Server::refuse(Conn& c, int status, const std::string& message) {
  const HttpResponse res = error_response(status, message);
  send_now(c.fd, response_head(res, 1, false, (long long)res.body.size()) + res.body);
  if (logger_) logger_(c.parser.request(), res);
  ::shutdown(c.fd, SHUT_WR);
  close_conn(c);
}

bool Server::accept_all() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return errno != EMFILE && errno != ENFILE;
    ++open_conns_;
    auto c = std::make_unique<Conn>(fd, opt_.limits);
    if (open_conns_ > opt_.max_connections) {
      refuse(*c, 503, "the server has too many open connections; retry later");
      continue;
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // streamed tokens go out at once
    c->remote = peer_address(fd);
    c->deadline = after(opt_.header_timeout_s);
    reading_.push_back(std::move(c));
  }
}

// Reads what is there (bounded per round so one fast sender cannot starve the others).
void Server::read_conn(Conn& c) {
  char buf[64 << 10];
  for (size_t round = 0; round < 16; ++round) {
    const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
    if (n > 0) {
      c.in.append(buf, size_t(n));
      if (size_t(n) < sizeof buf) return;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n == 0)
      c.eof = true;  // a request sent before the peer's shutdown(SHUT_WR) is still answered
    else
      close_conn(c);  // reset
    return;
  }
}

bool Server::advance(ConnPtr& cp) {
  Conn& c = *cp;
  const size_t used = c.parser.feed(c.in);
  c.in.erase(0, used);
  if (c.in.empty() && c.in.capacity() > (256 << 10)) std::string().swap(c.in);  // a large body's reads: let go
  const RequestParser::State st = c.parser.state();
  if (st == RequestParser::State::failed) {
    refuse(c, c.parser.error_status(), c.parser.error_message());
    cp.reset();
    return false;
  }
  if (st == RequestParser::State::head) {
    if (c.phase == Conn::Phase::idle && used > 0) {  // the first bytes of a request: its head is due
      c.phase = Conn::Phase::head;
      c.deadline = after(opt_.header_timeout_s);
    }
    return true;
  }
  if (!c.prechecked) {
    c.prechecked = true;
    if (precheck_) {
      if (auto refusal = precheck_(c.parser.request())) {
        refuse(c, refusal->first, refusal->second);
        cp.reset();
        return false;
      }
    }
    if (st == RequestParser::State::body) {
      c.phase = Conn::Phase::body;
      c.deadline = after(opt_.body_timeout_s);
    }
  }
  if (st == RequestParser::State::body) {
    if (c.parser.expects_continue() && !c.continue_sent) {
      c.continue_sent = true;
      send_now(c.fd, "HTTP/1.1 100 Continue\r\n\r\n");
    }
    return true;
  }
  // Complete: hand the request to a worker.
  c.keep_alive = c.parser.keep_alive() && !c.eof;
  Job job{std::move(cp), c.parser.take()};
  c.phase = Conn::Phase::idle;
  c.prechecked = c.continue_sent = false;
  std::unique_lock lock(mu_);
  if (queue_.size() >= opt_.max_queued) {
    lock.unlock();
    refuse(c, 503, "the server is overloaded; retry later");
    return false;
  }
  queue_.push_back(std::move(job));
  lock.unlock();
  work_cv_.notify_one();
  return false;
}

void Server::io_loop() {
  std::vector<pollfd> fds;
  Clock::time_point accept_paused_until{};
  while (!stopping_) {
    const auto now = Clock::now();
    const bool accepting = now >= accept_paused_until;
    fds.assign({{accepting ? listen_fd_ : -1, POLLIN, 0}, {wake_fd_, POLLIN, 0}});
    auto next = now + std::chrono::seconds(1);
    for (const auto& c : reading_) {
      fds.push_back({c->fd, POLLIN, 0});
      next = std::min(next, c->deadline);
    }
    const int timeout_ms =
        int(std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1));
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) break;
    if (stopping_) break;

    if (fds[1].revents) {
      uint64_t v;
      while (::read(wake_fd_, &v, sizeof v) > 0) {
      }
    }
    const size_t polled = reading_.size();
    for (size_t i = 0; i < polled; ++i) {
      ConnPtr& c = reading_[i];
      if (!(fds[i + 2].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      read_conn(*c);
      if (c->fd < 0) {
        c.reset();
      } else if (advance(c) && c->eof) {  // the peer is done sending and no request is complete
        close_conn(*c);
        c.reset();
      }
    }
    std::vector<ConnPtr> back;
    {
      std::lock_guard lock(mu_);
      back.swap(returned_);
    }
    for (auto& c : back) {  // kept alive: a pipelined request may already be buffered
      c->deadline = after(opt_.idle_timeout_s);
      if (advance(c)) reading_.push_back(std::move(c));
    }
    if (accepting && (fds[0].revents & POLLIN)) {
      if (!accept_all()) accept_paused_until = after(0.1);  // out of descriptors: try again shortly
    }
    const auto t = Clock::now();
    for (auto& c : reading_) {
      if (!c || t < c->deadline) continue;
      if (c->phase == Conn::Phase::idle && c->in.empty() && c->parser.request().method.empty())
        close_conn(*c);  // an idle keep-alive (or silent new) connection: closed without a word
      else
        refuse(*c, 408, c->phase == Conn::Phase::body ? "the request body was not received in time"
                                                      : "the request headers were not received in time");
      c.reset();
    }
    reading_.erase(std::remove(reading_.begin(), reading_.end(), nullptr), reading_.end());
  }
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    listen_fd_ = -1;
  }
  for (auto& c : reading_) close_conn(*c);
  reading_.clear();
}

void Server::worker_loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [&] { return !queue_.empty() || stopping_; });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    handle(job);
  }
}

void Server::handle(Job& job) {
  Conn& c = *job.conn;
  HttpRequest& req = job.request;
  req.remote_addr = c.remote;
  const int fd = c.fd;
  req.client_gone = [check = HangupCheck(fd, req.minor_version)]() mutable { return check.client_gone(); };

  HttpResponse res;
  const auto route = routes_.find(req.path);
  if (route == routes_.end()) {
    res = error_response(404, "no route " + req.path);
  } else if (auto h = route->second.find(req.method); h == route->second.end()) {
    std::string allow;
    for (const auto& [m, _] : route->second) allow += (allow.empty() ? "" : ", ") + m;
    res = error_response(405, "method " + req.method + " is not allowed on " + req.path + " (allowed: " + allow + ")");
    res.set_header("Allow", allow);
  } else {
    try {
      h->second(req, res);
    } catch (const std::exception& e) {
      res = error_response(500, std::string("internal error: ") + e.what());
    } catch (...) {
      res = error_response(500, "internal error");
    }
  }

  bool keep = c.keep_alive && !stopping_;
  bool ok;
  if (res.stream) {
    const bool chunked = req.minor_version >= 1;
    keep = keep && chunked;  // an HTTP/1.0 stream ends by closing the connection
    ok = send_all(fd, response_head(res, req.minor_version, keep, -1), opt_.write_timeout_s);
    SocketSink sink(fd, chunked, opt_.write_timeout_s);
    while (ok && !sink.is_done()) {
      bool more = false;
      try {
        more = res.stream(sink);
      } catch (...) {
      }
      if (!more || sink.failed()) ok = false;
    }
    ok = ok && sink.is_done() && !sink.failed();
    if (res.stream_closed) res.stream_closed(ok);
  } else {
    ok = send_all(fd, response_head(res, req.minor_version, keep, (long long)res.body.size()) + res.body,
                  opt_.write_timeout_s);
  }
  if (logger_) logger_(req, res);
  if (ok && keep) {
    std::lock_guard lock(mu_);
    returned_.push_back(std::move(job.conn));
    wake();
  } else {
    close_conn(c);
  }
}

}  // namespace llmctl::server::http
