// MpiComm: Comm over Open MPI for CPU ranks (host f32 tensors). MPI is initialized on first use
// (MPI_THREAD_SERIALIZED: one thread at a time calls it; the engine's step loop) and finalized at
// exit. Built only when CMake finds MPI (LLMCTL_HAVE_MPI); otherwise make_mpi_comm refuses by name.
#pragma once
#include <memory>

#include "engine/parallel/comm.h"

namespace llmctl {

// Whether this build has MPI.
bool mpi_available();
// The communicator of every rank mpirun started (MPI_COMM_WORLD). Throws InputError without MPI.
// report_stats: at exit, each rank prints its time in all-reduces and all-gathers and its memory
// (--comm-stats, for measurements).
std::unique_ptr<Comm> make_mpi_comm(bool report_stats = false);

}  // namespace llmctl
