// A fixed pool of worker threads for data-parallel loops. The calling thread takes part.
// parallel_for splits [0, n) into contiguous chunks, one per thread, so each index is always
// handled by the same code path whatever the thread count (results never depend on it).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace llmctl {

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
  std::mutex mu_;
  std::condition_variable cv_start_, cv_done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace llmctl
