#include "engine/parallel/launcher.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "engine/core/error.h"

namespace llmctl {

namespace {
int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}
}  // namespace

bool launched_by_mpi() { return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK"); }
int launcher_world_size() { return env_int("OMPI_COMM_WORLD_SIZE", 1); }
int launcher_rank() { return env_int("OMPI_COMM_WORLD_RANK", 0); }
int launcher_local_rank() { return env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0); }
int launcher_local_size() { return env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1); }

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

void exec_under_mpirun(int world, const std::vector<std::string>& argv) {
  const std::vector<std::string> cmd = mpirun_command(world, argv);
  std::vector<char*> c;
  for (const std::string& s : cmd) c.push_back(const_cast<char*>(s.c_str()));
  c.push_back(nullptr);
  // exec keeps the signal mask: serve blocks SIGINT/SIGTERM for its signal thread before it loads
  // the model, and mpirun must receive them to stop the ranks.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execvp(c[0], c.data());
  LLM_REQUIRE(false) << "cannot start " << world << " ranks: running mpirun failed (" << std::strerror(errno)
                     << "); install Open MPI (apt-get install openmpi-bin) or start the ranks yourself with mpirun";
  std::abort();  // not reached
}

}  // namespace llmctl
