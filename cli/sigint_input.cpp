#include "cli/sigint_input.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include "engine/core/error.h"

namespace llmctl::cli {

namespace {

std::atomic<bool> g_interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");
int g_wake_write_fd = -1;  // the pipe's write end, for the handler
int g_wake_read_fd = -1;

extern "C" void on_sigint(int) {
  const int saved = errno;
  g_interrupted.store(true, std::memory_order_relaxed);
  const char b = 1;
  if (g_wake_write_fd >= 0) (void)!write(g_wake_write_fd, &b, 1);  // full pipe: a wake-up is pending anyway
  errno = saved;
}

void drain_wake_pipe() {
  char sink[64];
  while (read(g_wake_read_fd, sink, sizeof sink) > 0) {
  }
}

}  // namespace

SigintInput::SigintInput() {
  if (g_wake_read_fd >= 0) throw Error("SigintInput: only one may exist");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw Error("SigintInput: pipe2 failed");
  g_wake_read_fd = fds[0];
  g_wake_write_fd = fds[1];
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
}

SigintInput::~SigintInput() {
  signal(SIGINT, SIG_DFL);
  const int w = g_wake_write_fd, r = g_wake_read_fd;
  g_wake_write_fd = g_wake_read_fd = -1;
  close(w);
  close(r);
}

std::atomic<bool>& SigintInput::interrupted() { return g_interrupted; }

void SigintInput::clear() {
  drain_wake_pipe();
  g_interrupted.store(false);
}

int SigintInput::next_byte() {
  while (pos_ == len_) {
    // The flag is checked after poll wakes and before it sleeps: a Ctrl-C between the check and
    // poll() left a byte in the pipe, which wakes it.
    if (g_interrupted.load()) return kInterrupted;
    struct pollfd p[2] = {{STDIN_FILENO, POLLIN, 0}, {g_wake_read_fd, POLLIN, 0}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return kEof;
    }
    if (p[1].revents) drain_wake_pipe();
    if (!p[0].revents) continue;
    const ssize_t n = read(STDIN_FILENO, buf_, sizeof buf_);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return kEof;
    pos_ = 0;
    len_ = static_cast<size_t>(n);
  }
  return static_cast<unsigned char>(buf_[pos_++]);
}

int SigintInput::read_line(std::string& line) {
  line.clear();
  for (;;) {
    const int c = next_byte();
    if (c == kInterrupted) return kInterrupted;
    if (c == kEof) return line.empty() ? kEof : 1;
    if (c == '\n') break;
    line.push_back(static_cast<char>(c));
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF files
  return 1;
}

}  // namespace llmctl::cli
