// ThreadPool hand-off microbenchmark (numbers are reported, never asserted): what one parallel_for
// costs beside its work, at each thread count. A decode step of a small model is a few hundred
// loops of a few microseconds each (the default model: 151 loops in 4.7 ms at 2 threads), so at 8-16
// threads the hand-off (waking the workers, claiming pieces, the caller waiting for the last) is
// what bounds its scaling.
//   empty:  parallel_for(threads) with nothing to do: the round trip alone
//   spin W: each thread's piece spins W ns (rdtsc-free: a steady_clock loop), so the ideal time is
//           W; the excess is the hand-off with the workers busy until the end
//   gap G:  the empty loop after G ns of serial work on the caller (workers back to spinning)
// Prints one row per thread count: the median over --reps batches of --calls calls, in ns per call.
// Options: --threads 1,2,4 (default 1, 2, 4, ... and the default thread count, cpu_topology.h)
// --calls 20000  --reps 7  --work-ns 2000  --gap-ns 1000
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "engine/core/cpu_topology.h"
#include "engine/core/thread_pool.h"

using namespace llmctl;
using Clock = std::chrono::steady_clock;

namespace {

void busy_ns(int64_t ns) {
  const auto end = Clock::now() + std::chrono::nanoseconds(ns);
  while (Clock::now() < end) {
  }
}

// Median ns per call of `calls` runs of body, over `reps` batches.
template <class F>
double median_ns(int calls, int reps, F&& body) {
  std::vector<double> per;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) body();
    per.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / calls);
  }
  std::sort(per.begin(), per.end());
  return per[per.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ThreadPool hand-off microbenchmark (tools/llmctl_thread_pool_bench.cpp)"};
  std::vector<int> threads;
  int calls = 20000, reps = 7;
  int64_t work_ns = 2000, gap_ns = 1000;
  app.add_option("--threads", threads, "thread counts")->delimiter(',')->check(CLI::Range(1, kMaxThreads));
  app.add_option("--calls", calls, "calls a batch")->check(CLI::PositiveNumber);
  app.add_option("--reps", reps, "batches (the median is reported)")->check(CLI::PositiveNumber);
  app.add_option("--work-ns", work_ns, "each piece's spin in the second column")->check(CLI::NonNegativeNumber);
  app.add_option("--gap-ns", gap_ns, "the caller's own work before each call in the third")
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);
  if (threads.empty()) {
    for (int t = 1; t < default_cpu_threads(); t *= 2) threads.push_back(t);
    threads.push_back(default_cpu_threads());
  }
  std::printf("default threads here: %d; ns per parallel_for, median of %d x %d calls\n", default_cpu_threads(), reps,
              calls);
  std::printf("| threads | empty | spin %lld ns (excess) | gap %lld ns + empty (excess) |\n", (long long)work_ns,
              (long long)gap_ns);
  std::printf("|---|---|---|---|\n");
  for (int t : threads) {
    ThreadPool pool(t);
    const int64_t n = pool.size();
    const auto nothing = [](int64_t, int64_t) {};
    const auto spin = [&](int64_t, int64_t) { busy_ns(work_ns); };
    for (int i = 0; i < 1000; ++i) pool.parallel_for(n, nothing);  // workers started and spinning
    const double empty = median_ns(calls, reps, [&] { pool.parallel_for(n, nothing); });
    const double spun = median_ns(std::max(1, calls / 4), reps, [&] { pool.parallel_for(n, spin); });
    const double gapped = median_ns(std::max(1, calls / 4), reps, [&] {
      busy_ns(gap_ns);
      pool.parallel_for(n, nothing);
    });
    std::printf("| %d | %.0f | %.0f (+%.0f) | %.0f (+%.0f) |\n", t, empty, spun, spun - double(work_ns), gapped,
                gapped - double(gap_ns));
    std::fflush(stdout);
  }
  return 0;
}
