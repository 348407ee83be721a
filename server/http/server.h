// http::Server: listens, reads requests on one I/O thread and runs route handlers on a fixed pool
// of workers. A connection is, in turn:
//   reading (I/O thread: head under a deadline -> precheck (API key) -> body under a deadline)
//   -> queued -> handling (a worker: handler, then the response written with a write timeout)
//   -> reading again (keep-alive; bytes already received for a pipelined request are parsed first)
//   or closed (Connection: close, HTTP/1.0, an error, a failed write, idle past the keep-alive timeout).
// A slow or silent client therefore holds a socket, never a worker, and never past its deadline.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "server/http/http_types.h"

namespace llmctl::server::http {

struct ServerOptions {
  HttpLimits limits;
  int workers = 96;
  size_t max_connections = 2048;  // open sockets; beyond, a new connection gets 503 and is closed
  size_t max_queued = 1024;       // complete requests waiting for a worker; beyond, 503
  double header_timeout_s = 10;   // first byte of a request -> end of its head (408 beyond)
  double body_timeout_s = 60;     // end of the head -> end of the body (408 beyond)
  double idle_timeout_s = 5;      // a kept-alive connection with no new request is closed
  double write_timeout_s = 10;    // a write that makes no progress this long: the client is gone
  int backlog = 1024;             // listen queue for bursts of new connections
};

using Handler = std::function<void(const HttpRequest&, HttpResponse&)>;
// Runs on the I/O thread as soon as a request's head is parsed: (status, message) refuses it before
// its body is read or a worker is used.
using Precheck = std::function<std::optional<std::pair<int, std::string>>(const HttpRequest&)>;
// The body of an error the server answers itself (parse errors, 404, 408, 413, ...).
using ErrorBody = std::function<std::string(int status, const std::string& message)>;
using Logger = std::function<void(const HttpRequest&, const HttpResponse&)>;

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  void route(const std::string& method, const std::string& path, Handler handler);
  void set_precheck(Precheck p) { precheck_ = std::move(p); }
  void set_error_body(ErrorBody e) { error_body_ = std::move(e); }
  void set_logger(Logger l) { logger_ = std::move(l); }

  // Binds and listens; port 0 picks a free port. Returns the port; throws InputError.
  int bind(const std::string& host, int port);
  // Serves until stop(); returns once the workers have finished their requests.
  void run();
  // Stops accepting and reading; safe from any thread, any number of times.
  void stop();

 private:
  struct Conn;
  using ConnPtr = std::unique_ptr<Conn>;
  struct Job {
    ConnPtr conn;
    HttpRequest request;
  };

  void io_loop();
  bool accept_all();  // false when out of file descriptors
  void read_conn(Conn& c);
  // Parses what `c` has buffered; false when the connection is done (answered and closed, or
  // handed to a worker). Called after reads and when a worker returns a kept-alive connection.
  bool advance(ConnPtr& c);
  void refuse(Conn& c, int status, const std::string& message);
  void close_conn(Conn& c);
  void worker_loop();
  void handle(Job& job);
  HttpResponse error_response(int status, const std::string& message) const;
  void wake();

  ServerOptions opt_;
  std::map<std::string, std::map<std::string, Handler>> routes_;  // path -> method -> handler
  Precheck precheck_;
  ErrorBody error_body_;
  Logger logger_;

  int listen_fd_ = -1, wake_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<size_t> open_conns_{0};
  std::vector<ConnPtr> reading_;  // I/O thread only

  std::mutex mu_;
  std::condition_variable work_cv_;
  std::deque<Job> queue_;           // complete requests for the workers
  std::vector<ConnPtr> returned_;   // kept-alive connections back from the workers
  std::vector<std::thread> workers_;
};

}  // namespace llmctl::server::http
