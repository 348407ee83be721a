// Ranks of a multi-process run. On one node the user types `llmctl serve -tp 3`: that process,
// not started by an MPI launcher, starts Open MPI's `mpirun -np 3` of its own command line (each
// rank then runs it) and stays as their supervisor; across nodes the user runs mpirun with -H
// themselves.
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

// The most ranks run_under_mpirun starts on a node of `cores` cores: 4 a core, and at least 8 (a
// 2-core laptop still runs -tp 4 -pp 2). More is a typo (-tp 1000), not a plan; whoever means it
// runs mpirun themselves.
int max_local_ranks(int cores);

// The mpirun command line that starts `world` copies of argv (argv[0] is replaced by this
// executable's path): -np world, --oversubscribe and --bind-to none (ranks share the cores the
// user gives them through --threads), and Open MPI's --allow-run-as-root when running as root.
std::vector<std::string> mpirun_command(int world, const std::vector<std::string>& argv);

// Runs mpirun_command(world, argv) as a child, in its own process group, and waits for it; returns
// the status to exit with (mpirun's: 0 when every rank exited 0; 128 + N when a signal N ended it).
// Call it before this process starts any thread. While the ranks run, this process:
//   - hands SIGINT and SIGTERM to the ranks themselves (mpirun's children), so that rank 0 stops as
//     one rank does (serve finishes its requests) and the run exits with the ranks' status: mpirun
//     given them would kill the ranks after about 2 s and exit 1. A second one, or SIGHUP / SIGQUIT,
//     goes to mpirun, which ends every rank;
//   - relays its standard input to mpirun when that is a terminal (mpirun, in a background process
//     group, would not read it), while this process is in the terminal's foreground;
//   - dies with mpirun's run: mpirun gets SIGTERM (PR_SET_PDEATHSIG) when this process is killed.
// Throws InputError, before anything starts, when world is above max_local_ranks of this node's
// cores, and naming mpirun when it cannot be started (Open MPI not installed: apt-get install
// openmpi-bin).
int run_under_mpirun(int world, const std::vector<std::string>& argv);

}  // namespace llmctl
