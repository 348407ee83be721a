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
// Spins (about 2 microseconds) the caller waits for the others before it looks for pieces a late
// thread left (thread_pool.h).
constexpr int kStealAfter = 128;

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

ThreadPool::ThreadPool(int num_threads, Model model) {
  LLM_REQUIRE(num_threads <= kMaxThreads) << num_threads << " threads: at most " << kMaxThreads;
  if (num_threads <= 0) num_threads = default_cpu_threads();
  threads_ = num_threads;
  simulated_ = model == Model::Simulated;
  claims_ = std::make_unique<Claim[]>(size_t(num_threads) * (kBalanceRounds + 1));
  done_ = std::make_unique<DoneCount[]>(size_t(num_threads));
  if (simulated_) return;
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_.store(true, std::memory_order_seq_cst);
  }
  cv_start_.notify_all();
  for (auto& t : workers_) t.join();
}

int64_t ThreadPool::piece_start(const Job& job, int64_t p) const {
  if (!job.balanced) return job.n * p / job.pieces;
  // T threads, R rounds: piece r T + i (r < R) starts at (1 - 2^-r + 2^-(r+1) i / T) of n, piece
  // R T + i at (1 - 2^-R + 2^-R i / T); in units of 1 / (T 2^R)
  const int64_t T = size(), R = kBalanceRounds, r = std::min<int64_t>(p / T, R), i = p - r * T;
  const int64_t at = r < R ? (((int64_t(1) << R) - (int64_t(1) << (R - r))) * T + (int64_t(1) << (R - r - 1)) * i)
                           : (((int64_t(1) << R) - 1) * T + i);
  return job.n * at / (T << R);
}

uint64_t ThreadPool::done_pieces() const {
  uint64_t sum = 0;
  for (int i = 0; i < size(); ++i) sum += done_[size_t(i)].pieces.load(std::memory_order_seq_cst);
  return sum;
}

bool ThreadPool::read_job(uint64_t generation, Job& job) const {
  const size_t b = generation / 2 % 2;
  job.generation = generation;
  job.fn = job_.fn[b].load(std::memory_order_relaxed);
  const int64_t nb = job_.n_balanced[b].load(std::memory_order_relaxed);
  job.n = nb / 2;
  job.balanced = nb % 2 != 0;
  job.pieces = job.balanced ? int64_t(size()) * (kBalanceRounds + 1) : size();
  std::atomic_thread_fence(std::memory_order_acquire);
  return job_.generation.load(std::memory_order_relaxed) == generation;
}

bool ThreadPool::claim(const Job& job, int64_t p) {
  // Generations only grow: once this job has claimed p, a thread that read an older job (and
  // lingers) cannot claim it either.
  std::atomic<uint64_t>& c = claims_[size_t(p)].generation;
  uint64_t v = c.load(std::memory_order_relaxed);
  while (v < job.generation)
    if (c.compare_exchange_weak(v, job.generation, std::memory_order_acq_rel, std::memory_order_relaxed)) return true;
  return false;
}

void ThreadPool::run_piece(int index, const Job& job, int64_t p) {
  const int64_t begin = piece_start(job, p), end = piece_start(job, p + 1);
  uint64_t dropped = 0;
  if (begin < end) {
    try {
      (*job.fn)(begin, end);
    } catch (...) {  // kept for the caller; the pieces not yet claimed are dropped (counted as done)
      {
        std::lock_guard<std::mutex> lk(mu_);
        if (!job_error_) job_error_ = std::current_exception();
      }
      next_piece_.store(job.pieces, std::memory_order_relaxed);
      for (int64_t q = 0; q < job.pieces; ++q) dropped += claim(job, q);
    }
  }
  // Its owner alone writes the count; seq_cst, against caller_waiting_ (the caller sets that, then
  // reads the counts under mu_): either it sees this count or this thread sees it waiting.
  std::atomic<uint64_t>& done = done_[size_t(index)].pieces;
  done.store(done.load(std::memory_order_relaxed) + 1 + dropped, std::memory_order_seq_cst);
  if (index != 0 && caller_waiting_.load(std::memory_order_seq_cst)) {
    std::lock_guard<std::mutex> lk(mu_);
    cv_done_.notify_one();
  }
}

void ThreadPool::run_pieces(int index, const Job& job) {
  if (claim(job, index)) run_piece(index, job, index);
  if (job.pieces > size())
    for (int64_t p; (p = next_piece_.fetch_add(1, std::memory_order_relaxed)) < job.pieces;)
      if (claim(job, p)) run_piece(index, job, p);
}

void ThreadPool::steal_pieces(int index, const Job& job, int64_t upto) {
  // Reading a claim pulls its line from the thread that wrote it, which then pays to claim its next
  // piece: so a loop of one piece a thread is searched only by the caller, and only when late; in a
  // balanced loop the workers look at the first pieces only (the later ones are the counter's: one
  // is left unclaimed only where a thread still on an older job took its number, and the caller
  // looks at every piece).
  for (int64_t k = 1; k <= upto; ++k) {
    if (job_.generation.load(std::memory_order_relaxed) != job.generation) return;  // that job is over
    const int64_t p = (index + k) % upto;
    if (claims_[size_t(p)].generation.load(std::memory_order_relaxed) < job.generation && claim(job, p))
      run_piece(index, job, p);
  }
}

void ThreadPool::parallel_for(int64_t n, LoopFn fn, bool balanced) {
  if (n <= 0) return;
  if (size() == 1 || n == 1) {
    fn(0, n);
    return;
  }
  Job job;
  job.generation = job_.generation.load(std::memory_order_relaxed) + 2;  // the caller alone writes it
  job.fn = &fn;
  job.n = n;
  job.balanced = balanced && n >= int64_t(size()) << kBalanceRounds;  // else one piece a thread
  job.pieces = job.balanced ? int64_t(size()) * (kBalanceRounds + 1) : size();
  if (simulated_) {
    run_simulated(job);
    return;
  }
  // The fence orders the buffer's new fields after the last job's generation for a reader that
  // lingers on a job two back (read_job).
  std::atomic_thread_fence(std::memory_order_release);
  const size_t b = job.generation / 2 % 2;
  job_.fn[b].store(&fn, std::memory_order_relaxed);
  job_.n_balanced[b].store(n * 2 + int64_t(job.balanced), std::memory_order_relaxed);
  next_piece_.store(size(), std::memory_order_relaxed);
  // seq_cst, against sleepers_ (a worker adds itself, then reads the generation under mu_): either
  // this thread sees the sleeper and wakes it, or the sleeper sees the job and does not wait
  job_.generation.store(job.generation, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard<std::mutex> lk(mu_);
    cv_start_.notify_all();
  }
  expected_done_ += uint64_t(job.pieces);
  run_pieces(0, job);
  if (job.balanced) steal_pieces(0, job, job.pieces);
  for (int i = 0; i < kSpinIterations && done_pieces() != expected_done_; ++i) {
    if (i == kStealAfter && !job.balanced) steal_pieces(0, job, job.pieces);
    cpu_relax(i);
  }
  if (done_pieces() != expected_done_) {
    steal_pieces(0, job, job.pieces);
    std::unique_lock<std::mutex> lk(mu_);
    caller_waiting_.store(true, std::memory_order_seq_cst);
    cv_done_.wait(lk, [this] { return done_pieces() == expected_done_; });
    caller_waiting_.store(false, std::memory_order_relaxed);
  }
  // every piece is done or dropped: no thread is in fn, nor will call it
  if (job_error_) std::rethrow_exception(std::exchange(job_error_, nullptr));
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0, generation = 0;
  auto ready = [&] {
    if (stop_.load(std::memory_order_acquire)) return true;
    generation = job_.generation.load(std::memory_order_seq_cst);
    return generation != seen;
  };
  for (;;) {
    for (int i = 0; i < kSpinIterations && !ready(); ++i) cpu_relax(i);
    if (!ready()) {
      std::unique_lock<std::mutex> lk(mu_);
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      cv_start_.wait(lk, ready);
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    Job job;
    if (!read_job(generation, job)) continue;  // a newer job came while reading: take that one
    seen = generation;
    run_pieces(index, job);
    if (job.balanced) steal_pieces(index, job, size());
  }
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool(g_requested_threads.load());
  return pool;
}

void ThreadPool::set_global_threads(int n) { g_requested_threads = n; }

}  // namespace llmctl
