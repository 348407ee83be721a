#include "engine/parallel/launcher.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "engine/core/error.h"

namespace llmctl {

namespace {
int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// Pids of the processes `parent` started (on one node, mpirun's children are the ranks), from the
// parent field of /proc/PID/stat.
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  DIR* d = opendir("/proc");
  if (!d) return out;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f("/proc/" + name + "/stat");
    std::string stat;
    if (!std::getline(f, stat)) continue;  // gone meanwhile
    const size_t close = stat.rfind(')');  // the command name may hold spaces and parentheses
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    char state = 0;
    long ppid = 0;
    if (rest >> state >> ppid && ppid == parent) out.push_back(pid_t(std::atol(name.c_str())));
  }
  closedir(d);
  return out;
}

// Standard input is a terminal whose foreground process group is this process's: reading it
// neither stops this process (SIGTTIN) nor takes a keystroke meant for another job.
bool stdin_in_foreground() { return isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp(); }

// Starts cmd as a child in its own process group, with this signal mask cleared (serve blocks
// SIGINT/SIGTERM for its signal thread before it loads the model; mpirun and the ranks must get
// them) and stdin_fd (if >= 0) as its standard input. Throws InputError when exec fails.
pid_t start_child(const std::vector<std::string>& cmd, int stdin_fd, int world) {
  std::vector<char*> c;
  for (const std::string& s : cmd) c.push_back(const_cast<char*>(s.c_str()));
  c.push_back(nullptr);
  int err[2];  // the child's errno when exec fails; closed by a successful exec
  LLM_CHECK(pipe2(err, O_CLOEXEC) == 0) << "pipe: " << std::strerror(errno);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);  // a terminal's Ctrl-C reaches this process, which decides where it goes
    prctl(PR_SET_PDEATHSIG, SIGTERM);  // this process killed: mpirun ends the ranks
    if (getppid() != parent) _exit(1);
    if (stdin_fd >= 0) dup2(stdin_fd, STDIN_FILENO);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execvp(c[0], c.data());
    const int e = errno;
    (void)!write(err[1], &e, sizeof e);
    _exit(127);
  }
  const int fork_errno = errno;
  close(err[1]);
  if (pid < 0) close(err[0]);
  LLM_CHECK(pid > 0) << "fork: " << std::strerror(fork_errno);
  setpgid(pid, 0);  // also here, so that no signal finds it in this process's group
  int e = 0;
  ssize_t n;
  while ((n = read(err[0], &e, sizeof e)) < 0 && errno == EINTR) {
  }
  close(err[0]);
  if (n == ssize_t(sizeof e)) {
    waitpid(pid, nullptr, 0);
    LLM_THROW() << "cannot start " << world << " ranks: running mpirun failed (" << std::strerror(e)
                << "); install Open MPI (apt-get install openmpi-bin) or start the ranks yourself with mpirun";
  }
  return pid;
}

// Waits for mpirun (pid) while forwarding signals (sigfd: a signalfd of them) and, when relay_fd
// >= 0, this terminal's input to relay_fd (non-blocking; closed at end of input). Returns the
// status to exit with.
int supervise(pid_t pid, int sigfd, int relay_fd) {
  std::string pending;  // read from the terminal, not yet written to mpirun
  int interrupts = 0;
  for (;;) {
    int status = 0;
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      if (relay_fd >= 0) close(relay_fd);
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    }
    pollfd fds[2] = {{sigfd, POLLIN, 0}, {-1, 0, 0}};
    if (relay_fd >= 0 && !pending.empty()) fds[1] = {relay_fd, POLLOUT, 0};
    else if (relay_fd >= 0 && stdin_in_foreground()) fds[1] = {STDIN_FILENO, POLLIN, 0};
    if (poll(fds, 2, 500) <= 0) continue;  // the timeout rechecks mpirun and the foreground
    signalfd_siginfo si;
    while (fds[0].revents && read(sigfd, &si, sizeof si) == ssize_t(sizeof si)) {
      const int sig = int(si.ssi_signo);
      if (sig == SIGCHLD) continue;  // waitpid above
      if ((sig == SIGINT || sig == SIGTERM) && interrupts++ == 0) {
        const std::vector<pid_t> ranks = children_of(pid);
        for (pid_t r : ranks) kill(r, sig);
        if (!ranks.empty()) continue;  // none yet: mpirun is starting them, and ends them
      }
      kill(pid, sig);
    }
    if (fds[1].fd == STDIN_FILENO && fds[1].revents) {
      char buf[4096];
      const ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
      if (n > 0) pending.assign(buf, size_t(n));
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {  // end of input (Ctrl-D): rank 0's too
        close(relay_fd);
        relay_fd = -1;
      }
    } else if (fds[1].fd == relay_fd && fds[1].revents) {
      const ssize_t n = write(relay_fd, pending.data(), pending.size());
      if (n > 0) pending.erase(0, size_t(n));
      if (n < 0 && errno != EINTR && errno != EAGAIN) {  // mpirun closed it
        close(relay_fd);
        relay_fd = -1;
        pending.clear();
      }
    }
  }
}

}  // namespace

bool launched_by_mpi() { return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK"); }
int launcher_world_size() { return env_int("OMPI_COMM_WORLD_SIZE", 1); }
int launcher_rank() { return env_int("OMPI_COMM_WORLD_RANK", 0); }
int launcher_local_rank() { return env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0); }
int launcher_local_size() { return env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1); }

int max_local_ranks(int cores) { return std::max(8, 4 * std::max(1, cores)); }

std::vector<std::string> mpirun_command(int world, const std::vector<std::string>& argv) {
  LLM_CHECK(!argv.empty() && world >= 1) << "mpirun_command: world " << world << ", " << argv.size() << " args";
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  std::vector<std::string> cmd = {"mpirun", "-np", std::to_string(world), "--oversubscribe", "--bind-to", "none"};
  // Open MPI refuses root unless told otherwise (containers and CI run as root).
  if (geteuid() == 0) cmd.push_back("--allow-run-as-root");
  cmd.push_back(ec ? argv[0] : self.string());
  cmd.insert(cmd.end(), argv.begin() + 1, argv.end());
  return cmd;
}

int run_under_mpirun(int world, const std::vector<std::string>& argv) {
  const int cores = int(std::thread::hardware_concurrency()), most = max_local_ranks(cores);
  LLM_REQUIRE(world <= most) << "-tp x -pp asks for " << world << " ranks, more than llmctl starts on one node of "
                             << cores << " cores (at most " << most << ", 4 a core); to run them anyway, start them "
                             << "yourself: mpirun -np " << world << " --oversubscribe llmctl ...";
  const std::vector<std::string> cmd = mpirun_command(world, argv);
  // The signals this process forwards, blocked and read from a signalfd; SIGPIPE blocked too, so
  // that a write to a gone mpirun fails instead of ending this process.
  sigset_t set, old;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) sigaddset(&set, s);
  sigset_t blocked = set;
  sigaddset(&blocked, SIGPIPE);
  sigprocmask(SIG_BLOCK, &blocked, &old);
  const int sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  LLM_CHECK(sigfd >= 0) << "signalfd: " << std::strerror(errno);
  // A terminal's input reaches mpirun through a pipe: in its own process group, mpirun reads no
  // terminal. Other input (a file, a pipe) it reads itself.
  int relay[2] = {-1, -1};
  if (isatty(STDIN_FILENO)) {
    LLM_CHECK(pipe2(relay, O_CLOEXEC) == 0) << "pipe: " << std::strerror(errno);
  }
  pid_t pid = -1;
  try {
    pid = start_child(cmd, relay[0], world);
  } catch (...) {
    for (int fd : {sigfd, relay[0], relay[1]})
      if (fd >= 0) close(fd);
    sigprocmask(SIG_SETMASK, &old, nullptr);
    throw;
  }
  if (relay[0] >= 0) {
    close(relay[0]);
    fcntl(relay[1], F_SETFL, fcntl(relay[1], F_GETFL) | O_NONBLOCK);
  }
  const int status = supervise(pid, sigfd, relay[1]);
  close(sigfd);
  sigprocmask(SIG_SETMASK, &old, nullptr);
  return status;
}

}  // namespace llmctl
