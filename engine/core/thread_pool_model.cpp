// A modelled pool's parallel_for (thread_pool.h): every piece on the caller, timed, and the loop's
// time on size() threads worked out from how a real pool hands the pieces out.
#include <algorithm>
#include <chrono>
#include <vector>

#include "engine/core/error.h"
#include "engine/core/thread_pool.h"

namespace llmctl {

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

double modelled_loop_seconds(std::span<const double> piece_s, int threads) {
  LLM_CHECK(threads >= 1) << "modelled_loop_seconds: " << threads << " threads";
  std::vector<double> clock(size_t(threads), 0.0);
  for (size_t p = 0; p < piece_s.size(); ++p) {
    double& c = p < clock.size() ? clock[p] : *std::min_element(clock.begin(), clock.end());
    c += piece_s[p];
  }
  return *std::max_element(clock.begin(), clock.end());
}

void ThreadPool::run_simulated(const Job& job) {
  std::vector<double> piece_s(size_t(job.pieces), 0.0);
  const double start = now_seconds();
  double at = start;  // one clock read a piece: each piece's end is the next one's start
  for (int64_t p = 0; p < job.pieces; ++p) {
    const int64_t begin = piece_start(job, p), end = piece_start(job, p + 1);
    if (begin >= end) continue;
    (*job.fn)(begin, end);  // an exception leaves this loop out of the account and reaches the caller
    const double done = now_seconds();
    piece_s[size_t(p)] = done - at;
    at = done;
  }
  double work = 0;
  for (double s : piece_s) work += s;
  ++account_.loops;
  account_.work_s += work;
  account_.critical_s += modelled_loop_seconds(piece_s, size());
  account_.inside_s += now_seconds() - start;
}

}  // namespace llmctl
