#include "engine/core/thread_pool.h"

#include "engine/core/error.h"

#include <algorithm>
#include <memory>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace llmctl {

namespace {
std::atomic<int> g_requested_threads{0};

// About 0.1-0.5 ms of spinning before a thread sleeps: longer than the gaps between the loops of one
// decode step, short enough that an idle pool (a server between requests) costs nothing.
constexpr int kSpinIterations = 1 << 14;

// One spin step. Every 256th yields the core: when there are more runnable threads than cores
// (parallel test runs, a second process), the thread being waited for gets to run.
inline void cpu_relax(int i) {
  if ((i & 255) == 255) {
    std::this_thread::yield();
    return;
  }
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}
}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  LLM_REQUIRE(num_threads <= kMaxThreads) << num_threads << " threads: at most " << kMaxThreads;
  if (num_threads <= 0) num_threads = int(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_.store(true, std::memory_order_release);
  }
  cv_start_.notify_all();
  for (auto& t : workers_) t.join();
}

static void run_chunk(const std::function<void(int64_t, int64_t)>& fn, int64_t n, int index, int count) {
  int64_t begin = n * index / count, end = n * (index + 1) / count;
  if (begin < end) fn(begin, end);
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    fn(0, n);
    return;
  }
  job_ = &fn;
  job_n_ = n;
  pending_.store(int(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);  // publishes job_ / job_n_ / pending_
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (sleepers_ > 0) cv_start_.notify_all();
  }
  run_chunk(fn, n, 0, size());
  for (int i = 0; i < kSpinIterations && pending_.load(std::memory_order_acquire) != 0; ++i) cpu_relax(i);
  if (pending_.load(std::memory_order_acquire) != 0) {
    std::unique_lock<std::mutex> lk(mu_);
    caller_waiting_ = true;
    cv_done_.wait(lk, [this] { return pending_.load(std::memory_order_acquire) == 0; });
    caller_waiting_ = false;
  }
  job_ = nullptr;
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    auto ready = [&] {
      return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen;
    };
    for (int i = 0; i < kSpinIterations && !ready(); ++i) cpu_relax(i);
    if (!ready()) {
      std::unique_lock<std::mutex> lk(mu_);
      ++sleepers_;
      cv_start_.wait(lk, ready);
      --sleepers_;
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    run_chunk(*job_, job_n_, index, size());
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lk(mu_);
      if (caller_waiting_) cv_done_.notify_one();
    }
  }
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool(g_requested_threads.load());
  return pool;
}

void ThreadPool::set_global_threads(int n) { g_requested_threads = n; }

}  // namespace llmctl
