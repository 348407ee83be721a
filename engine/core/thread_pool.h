// A fixed pool of worker threads for data-parallel loops. The calling thread takes part.
// parallel_for splits [0, n) into contiguous chunks, one per thread, so each index is always
// handled by the same code path whatever the thread count (results never depend on it).
// Hand-off: a decode step runs a few hundred short parallel_for calls, so workers (and the caller,
// waiting for them) first spin on atomics for a short while and only then sleep on a condition
// variable: a futex wake per call would cost more than many of the loops themselves. One caller
// at a time (parallel_for is not reentrant).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace llmctl {

// The most threads a pool takes: far above any machine's cores, far below what a typo
// (-t 100000) would start.
constexpr int kMaxThreads = 1024;

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);  // 0 = hardware concurrency
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }
  // fn(begin, end) over disjoint ranges covering [0, n); returns when all are done.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

  static ThreadPool& global();             // sized by set_global_threads or the core count
  static void set_global_threads(int n);   // call before the first global()

 private:
  void worker_loop(int index);
  std::vector<std::thread> workers_;
  std::mutex mu_;  // guards sleepers_ / caller_waiting_ and the condition variables' waits
  std::condition_variable cv_start_, cv_done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;  // published by generation_'s release
  int64_t job_n_ = 0;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  int sleepers_ = 0;             // workers blocked on cv_start_
  bool caller_waiting_ = false;  // the caller blocked on cv_done_
};

}  // namespace llmctl
