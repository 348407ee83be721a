// A fixed pool of worker threads for data-parallel loops. The calling thread takes part.
// parallel_for splits [0, n) into contiguous pieces, always the same for one n, thread count and
// `balanced`: one a thread, or (balanced) pieces of falling size, a quarter of [0, n) in the first
// two of two threads, then an eighth, ... (kBalanceRounds rounds, then the rest in equal parts).
// Thread i takes piece i first (the caller is thread 0), then (balanced) the later pieces in order
// from a shared counter. A piece no thread has claimed by then (its thread slowed by another
// process, or asleep) is taken by any thread in a balanced loop, else by the caller once it has
// waited a moment (kStealAfter spins). The caller waits for the pieces, not for the threads: a
// worker that never got to a loop does not hold it up. Each index is handled by the same code path
// whatever the thread count or timing (results never depend on them). An exception thrown by fn
// on any thread stops the claiming of further pieces and is rethrown by parallel_for once every
// piece is done or dropped (the first one, if several).
// Hand-off: a decode step runs a few hundred short parallel_for calls, so workers (and the caller,
// waiting for them) first spin on atomics for a short while and only then sleep on a condition
// variable: a futex wake per call would cost more than many of the loops themselves. What one call
// moves between cores is kept small: the job (one cache line, read by every thread), each piece's
// claim (its own line, which its usual owner last wrote) and each thread's count of pieces done
// (its own line, which the caller reads); no counter that every thread updates at the start and
// end of every loop (their updates of one line queue up one after another). One caller at a time
// (parallel_for is not reentrant).
// A modelled pool (ThreadPool(n, ThreadPool::Model::Simulated)) starts no thread: the caller runs
// every piece, each timed, and the pool adds up what n threads would have taken (LoopAccount). It
// measures the engine's own scaling (how loops split, work every thread repeats, what runs between
// loops) on a machine with fewer cores, not the machine's (memory bandwidth, caches, hand-offs).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/core/loop_account.h"

namespace llmctl {

// The most threads a pool takes: far above any machine's cores, far below what a typo
// (-t 100000) would start.
constexpr int kMaxThreads = 1024;
// Rounds of halving pieces a balanced parallel_for makes (then one more round of equal parts).
constexpr int kBalanceRounds = 3;

// fn(begin, end) as parallel_for takes it: a reference to the caller's callable, which outlives the
// call (parallel_for returns only when every piece is done). Unlike a std::function it never
// allocates: a decode step passes a few hundred lambdas, most capturing more than std::function
// holds in place.
class LoopFn {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, LoopFn> && std::is_invocable_v<F&, int64_t, int64_t>)
  LoopFn(F&& f)  // NOLINT(google-explicit-constructor): every lambda passed to parallel_for
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* o, int64_t begin, int64_t end) {
          (*static_cast<std::remove_reference_t<F>*>(o))(begin, end);
        }) {}
  void operator()(int64_t begin, int64_t end) const { call_(object_, begin, end); }

 private:
  void* object_;
  void (*call_)(void*, int64_t, int64_t);
};

class ThreadPool {
 public:
  enum class Model { Threads, Simulated };
  explicit ThreadPool(int num_threads, Model model = Model::Threads);  // 0 = default_cpu_threads() (cpu_topology.h)
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;

  int size() const { return threads_; }
  bool simulated() const { return simulated_; }
  const LoopAccount& account() const { return account_; }  // a modelled pool's (zeros otherwise)
  // fn(begin, end) over disjoint ranges covering [0, n); returns when all are done. balanced: in
  // pieces of falling size (above), for loops whose calls cost little beside their work.
  void parallel_for(int64_t n, LoopFn fn, bool balanced = false);

  static ThreadPool& global();             // sized by set_global_threads or default_cpu_threads()
  static void set_global_threads(int n);   // call before the first global()

 private:
  static constexpr size_t kLine = 64;
  // One job as a thread read it: its generation, the loop and its pieces.
  struct Job {
    uint64_t generation;
    const LoopFn* fn;
    int64_t n, pieces;
    bool balanced;
  };
  struct alignas(kLine) Claim {  // the generation whose job last claimed this piece
    std::atomic<uint64_t> generation{0};
  };
  struct alignas(kLine) DoneCount {  // pieces a thread finished or dropped, all jobs (written by it alone)
    std::atomic<uint64_t> pieces{0};
  };
  void worker_loop(int index);
  bool read_job(uint64_t generation, Job& job) const;  // false: a newer job came meanwhile
  void run_pieces(int index, const Job& job);           // its own piece, then (balanced) the counter's
  void steal_pieces(int index, const Job& job, int64_t upto);  // runs pieces [0, upto) no thread claimed
  bool claim(const Job& job, int64_t p);                // piece p for this job (once, by one thread)
  void run_piece(int index, const Job& job, int64_t p);
  int64_t piece_start(const Job& job, int64_t p) const;  // the first index of piece p
  uint64_t done_pieces() const;                          // the sum of every thread's DoneCount
  void run_simulated(const Job& job);                    // a modelled pool's parallel_for (thread_pool_model.cpp)

  int threads_ = 1;
  bool simulated_ = false;
  LoopAccount account_;
  std::vector<std::thread> workers_;
  std::unique_ptr<Claim[]> claims_;    // size() * (kBalanceRounds + 1)
  std::unique_ptr<DoneCount[]> done_;  // size()
  uint64_t expected_done_ = 0;         // the caller's: pieces of every job so far
  // The job, in one cache line with its generation (even, +2 a job): the fields of job g in buffer
  // (g / 2) % 2, written before the generation; a reader checks the generation is unchanged after
  // reading them (the buffer is written again only two jobs later).
  struct alignas(kLine) Published {
    std::atomic<uint64_t> generation{0};
    std::atomic<const LoopFn*> fn[2] = {nullptr, nullptr};
    std::atomic<int64_t> n_balanced[2] = {0, 0};  // n * 2 + balanced
  };
  Published job_;
  std::atomic<bool> stop_{false};
  alignas(kLine) std::atomic<int64_t> next_piece_{0};  // balanced: the next of the later pieces
  alignas(kLine) std::atomic<int> sleepers_{0};        // workers blocked on cv_start_
  std::atomic<bool> caller_waiting_{false};            // the caller blocked on cv_done_
  std::mutex mu_;  // guards job_error_ and the condition variables' waits
  std::condition_variable cv_start_, cv_done_;
  std::exception_ptr job_error_;  // the first exception of the current job
};

}  // namespace llmctl
