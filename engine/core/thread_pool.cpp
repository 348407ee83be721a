#include "engine/core/thread_pool.h"

#include "engine/core/cpu_topology.h"
#include "engine/core/error.h"

#include <algorithm>
#include <memory>
#include <utility>
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
  if (num_threads <= 0) num_threads = default_cpu_threads();
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_.store(true, std::memory_order_release);
  }
  cv_start_.notify_all();
  for (auto& t : workers_) t.join();
}

int64_t ThreadPool::piece_start(int64_t p) const {
  if (!job_balanced_) return job_n_ * p / job_pieces_;
  // T threads, R rounds: piece r T + i (r < R) starts at (1 - 2^-r + 2^-(r+1) i / T) of n, piece
  // R T + i at (1 - 2^-R + 2^-R i / T); in units of 1 / (T 2^R)
  const int64_t T = size(), R = kBalanceRounds, r = std::min<int64_t>(p / T, R), i = p - r * T;
  const int64_t at = r < R ? (((int64_t(1) << R) - (int64_t(1) << (R - r))) * T + (int64_t(1) << (R - r - 1)) * i)
                           : (((int64_t(1) << R) - 1) * T + i);
  return job_n_ * at / (T << R);
}

void ThreadPool::run_pieces() {
  for (int64_t p; (p = next_piece_.fetch_add(1, std::memory_order_relaxed)) < job_pieces_;) {
    const int64_t begin = piece_start(p), end = piece_start(p + 1);
    if (begin >= end) continue;
    try {
      (*job_)(begin, end);
    } catch (...) {  // kept for the caller; the pieces not yet claimed are dropped
      std::lock_guard<std::mutex> lk(mu_);
      if (!job_error_) job_error_ = std::current_exception();
      next_piece_.store(job_pieces_, std::memory_order_relaxed);
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, bool balanced) {
  if (n <= 0) return;
  if (workers_.empty() || n == 1) {
    fn(0, n);
    return;
  }
  job_ = &fn;
  job_n_ = n;
  job_balanced_ = balanced && n >= int64_t(size()) << kBalanceRounds;  // else one piece a thread
  job_pieces_ = job_balanced_ ? int64_t(size()) * (kBalanceRounds + 1) : size();
  next_piece_.store(0, std::memory_order_relaxed);
  pending_.store(int(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);  // publishes job_ / job_n_ / pending_
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (sleepers_ > 0) cv_start_.notify_all();
  }
  run_pieces();
  for (int i = 0; i < kSpinIterations && pending_.load(std::memory_order_acquire) != 0; ++i) cpu_relax(i);
  if (pending_.load(std::memory_order_acquire) != 0) {
    std::unique_lock<std::mutex> lk(mu_);
    caller_waiting_ = true;
    cv_done_.wait(lk, [this] { return pending_.load(std::memory_order_acquire) == 0; });
    caller_waiting_ = false;
  }
  job_ = nullptr;
  if (job_error_) std::rethrow_exception(std::exchange(job_error_, nullptr));  // every thread is done with fn
}

void ThreadPool::worker_loop() {
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
    run_pieces();
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
