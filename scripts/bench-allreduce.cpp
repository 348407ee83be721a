// The CPU ranks' all-reduce, two ways, at the sizes a step of the default model moves (hidden 576
// x T rows): MPI_Allreduce (its algorithm, and so each element's order of additions, picked by
// size), and llmctl's rank-ordered one (MpiComm::all_reduce_sum: alltoall, ordered sum, allgather).
// Build and run (3 ranks, as -tp 3):
//   mpicxx -O2 -std=c++20 scripts/bench-allreduce.cpp -o /tmp/bench-allreduce
//   mpirun -np 3 --oversubscribe --bind-to none /tmp/bench-allreduce
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  for (int rows : {1, 8, 64, 512, 2048}) {
    const int n = 576 * rows, chunk = (n + world - 1) / world;
    std::vector<float> x(static_cast<size_t>(n)), send(static_cast<size_t>(chunk) * world),
        parts(static_cast<size_t>(chunk) * world);
    const int iters = rows >= 512 ? 50 : 500;
    double t_mpi = 0, t_ordered = 0;
    for (int rep = 0; rep < 2; ++rep) {  // alternate, twice
      for (float& v : x) v = float(rank + 1) * 0.001f;
      MPI_Barrier(MPI_COMM_WORLD);
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) MPI_Allreduce(MPI_IN_PLACE, x.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      t_mpi += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) {  // MpiComm::all_reduce_sum (n divides here: no padding copy)
        MPI_Alltoall(x.data(), chunk, MPI_FLOAT, parts.data(), chunk, MPI_FLOAT, MPI_COMM_WORLD);
        std::copy_n(parts.data(), chunk, send.data());
        for (int r = 1; r < world; ++r)
          for (int j = 0; j < chunk; ++j) send[size_t(j)] += parts[size_t(r) * chunk + j];
        MPI_Allgather(send.data(), chunk, MPI_FLOAT, x.data(), chunk, MPI_FLOAT, MPI_COMM_WORLD);
      }
      t_ordered += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    if (rank == 0)
      std::printf("rows %5d (%8d floats): MPI_Allreduce %8.1f us, rank-ordered %8.1f us\n", rows, n,
                  t_mpi / (2 * iters) * 1e6, t_ordered / (2 * iters) * 1e6);
  }
  MPI_Finalize();
}
