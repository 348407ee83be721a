// Ranks of a multi-process run. On one node the user types `llmctl serve -tp 3`: that process,
// not started by an MPI launcher, re-executes itself under Open MPI's `mpirun -np 3` (each rank
// then runs the same command line); across nodes the user runs mpirun with -H themselves.
#pragma once
#include <string>
#include <vector>

namespace llmctl {

// This process was started by an MPI launcher (Open MPI's mpirun / PMIx environment).
bool launched_by_mpi();
// World size and rank the launcher gave this process (1 / 0 when not launched by MPI).
int launcher_world_size();
int launcher_rank();
// This process's place among the ranks on its node (picks its GPU), 0 when not launched by MPI.
int launcher_local_rank();
// The number of ranks on this process's node (1 when not launched by MPI).
int launcher_local_size();

// The mpirun command line that starts `world` copies of argv (argv[0] is replaced by this
// executable's path): -np world, --oversubscribe and --bind-to none (ranks share the cores the
// user gives them through --threads), and Open MPI's --allow-run-as-root when running as root.
std::vector<std::string> mpirun_command(int world, const std::vector<std::string>& argv);

// Replaces this process with mpirun_command(world, argv). Throws InputError naming mpirun when it
// cannot be started (Open MPI not installed: apt-get install openmpi-bin).
[[noreturn]] void exec_under_mpirun(int world, const std::vector<std::string>& argv);

}  // namespace llmctl
