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
// Options: --threads 1,2,4  --calls 20000  --reps 7  --work-ns 2000  --gap-ns 1000
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "engine/core/cpu_topology.h"
#include "engine/core/thread_pool.h"

using namespace llmctl;
using Clock = std::chrono::steady_clock;

namespace {

std::vector<int> parse_list(const char* s) {
  std::vector<int> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(std::atoi(item.c_str()));
  return v;
}

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
  std::vector<int> threads;
  int calls = 20000, reps = 7;
  int64_t work_ns = 2000, gap_ns = 1000;
  for (int i = 1; i < argc; ++i) {
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", argv[i]);
        std::exit(2);
      }
      return argv[++i];
    };
    if (!std::strcmp(argv[i], "--threads")) threads = parse_list(next());
    else if (!std::strcmp(argv[i], "--calls")) calls = std::atoi(next());
    else if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(next());
    else if (!std::strcmp(argv[i], "--work-ns")) work_ns = std::atoll(next());
    else if (!std::strcmp(argv[i], "--gap-ns")) gap_ns = std::atoll(next());
    else {
      std::fprintf(stderr, "unknown option %s (see the header of tools/llmctl_thread_pool_bench.cpp)\n", argv[i]);
      return 2;
    }
  }
  if (threads.empty()) threads = {1, 2};
  if (calls < 1 || reps < 1 || work_ns < 0 || gap_ns < 0) {
    std::fprintf(stderr, "--calls and --reps must be positive, --work-ns and --gap-ns not negative\n");
    return 2;
  }
  std::printf("default threads here: %d; ns per parallel_for, median of %d x %d calls\n", default_cpu_threads(), reps,
              calls);
  std::printf("| threads | empty | spin %lld ns (excess) | gap %lld ns + empty (excess) |\n", (long long)work_ns,
              (long long)gap_ns);
  std::printf("|---|---|---|---|\n");
  for (int t : threads) {
    if (t < 1 || t > kMaxThreads) {
      std::fprintf(stderr, "--threads: %d is not a thread count\n", t);
      return 2;
    }
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
