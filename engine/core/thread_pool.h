// A fixed pool of worker threads for data-parallel loops. The calling thread takes part.
// parallel_for splits [0, n) into contiguous pieces, always the same for one n, thread count and
// `balanced`, which the threads claim in order as they finish the last: one a thread, or (balanced)
// pieces of falling size, a quarter of [0, n) in the first two of two threads, then an eighth,
// ... (kBalanceRounds rounds, then the rest in equal parts): a thread slowed by another process or
// on a slower core takes fewer, and the first pieces are long (long streams for the prefetchers).
// Each index is handled by the same code path whatever the thread count or timing (results never
// depend on them). An exception thrown by fn on any thread stops the claiming of further pieces and
// is rethrown by parallel_for once every thread is done with fn (the first one, if several).
// Hand-off: a decode step runs a few hundred short parallel_for calls, so workers (and the caller,
// waiting for them) first spin on atomics for a short while and only then sleep on a condition
// variable: a futex wake per call would cost more than many of the loops themselves. One caller
// at a time (parallel_for is not reentrant).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace llmctl {

// The most threads a pool takes: far above any machine's cores, far below what a typo
// (-t 100000) would start.
constexpr int kMaxThreads = 1024;
// Rounds of halving pieces a balanced parallel_for makes (then one more round of equal parts).
constexpr int kBalanceRounds = 3;

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);  // 0 = default_cpu_threads() (cpu_topology.h)
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }
  // fn(begin, end) over disjoint ranges covering [0, n); returns when all are done. balanced: in
  // pieces of falling size (above), for loops whose calls cost little beside their work.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, bool balanced = false);

  static ThreadPool& global();             // sized by set_global_threads or default_cpu_threads()
  static void set_global_threads(int n);   // call before the first global()

 private:
  void worker_loop();
  std::vector<std::thread> workers_;
  std::mutex mu_;  // guards sleepers_ / caller_waiting_ and the condition variables' waits
  std::condition_variable cv_start_, cv_done_;
  void run_pieces();  // claims and runs pieces of the current job until none is left
  int64_t piece_start(int64_t p) const;  // the first index of piece p (job_pieces_: job_n_)
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;  // published by generation_'s release
  int64_t job_n_ = 0, job_pieces_ = 0;
  bool job_balanced_ = false;
  std::exception_ptr job_error_;  // the first exception of the current job (guarded by mu_)
  std::atomic<int64_t> next_piece_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  int sleepers_ = 0;             // workers blocked on cv_start_
  bool caller_waiting_ = false;  // the caller blocked on cv_done_
};

}  // namespace llmctl
