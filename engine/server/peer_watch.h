// PeerWatch: has the client of a request hung up? cpp-httplib 0.11 gives handlers no connection
// state, so the request's socket is found among the process's descriptors by its two endpoints
// (unique for a TCP connection while it is open) and polled for a hang-up. Linux only; where the
// socket cannot be found, gone() stays false. A client that half-closes its side (shutdown(SHUT_WR))
// while waiting counts as gone, as it does for most servers.
#pragma once
#include <string>

namespace llmctl::server {

class PeerWatch {
 public:
  PeerWatch(const std::string& local_addr, int local_port, const std::string& remote_addr, int remote_port);
  bool found() const { return fd_ >= 0; }
  // True once the peer has closed or reset the connection (POLLRDHUP / POLLHUP / POLLERR).
  bool gone() const;

 private:
  int fd_ = -1;
};

}  // namespace llmctl::server
