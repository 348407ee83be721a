// What a modelled thread pool's loops took (thread_pool.h, ThreadPool::Model::Simulated).
#pragma once
#include <cstdint>
#include <span>

namespace llmctl {

// A modelled pool's loops so far. Each loop's pieces go to its threads as a real pool first hands
// them out (thread i piece i; a balanced loop's later pieces, in order, to whichever thread is free
// first), so the loop would take its busiest thread's time. Time outside the loops is the caller's
// alone either way: n threads would take the wall time less inside_s - critical_s.
struct LoopAccount {
  uint64_t loops = 0;     // parallel_for calls (of more than one piece)
  double work_s = 0;      // every piece's time, summed
  double inside_s = 0;    // the loops' time on the caller: work_s and the model's own timing of it
  double critical_s = 0;  // each loop's busiest thread's time, summed: what n threads would take

  LoopAccount& operator+=(const LoopAccount& o) {
    loops += o.loops, work_s += o.work_s, inside_s += o.inside_s, critical_s += o.critical_s;
    return *this;
  }
  LoopAccount operator-(const LoopAccount& o) const {  // the loops between two accounts
    return {loops - o.loops, work_s - o.work_s, inside_s - o.inside_s, critical_s - o.critical_s};
  }
};

// One loop's time on `threads` threads from its pieces' times, in the order the pool numbers them
// (thread_pool.h: thread i takes piece i; pieces from `threads` on go, in order, to the thread
// whose clock is lowest, the lower index on a tie): the busiest thread's clock.
double modelled_loop_seconds(std::span<const double> piece_s, int threads);

}  // namespace llmctl
