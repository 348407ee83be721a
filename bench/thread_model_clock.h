// Times as a modelled thread pool's threads would have taken them (bench latency
// --simulate-threads; engine/core/loop_account.h). The backend runs every loop's pieces on one
// thread; a timestamp taken during step k becomes the wall time less what the loops before it,
// step k's included, would have saved on the modelled threads (each loop's pieces at once rather
// than one after another, with the model's own timing). Where the backend's threads are real, times stay as they are.
#pragma once
#include <vector>

#include "engine/backend/backend.h"

namespace llmctl::bench {

class ThreadModelClock {
 public:
  explicit ThreadModelClock(const Backend& backend);
  bool modelled() const { return modelled_; }
  void mark();  // after each engine step (and once before the first)
  // A steady-clock timestamp (seconds, as RequestResult's) taken before the last mark, on the
  // modelled threads' clock
  double at(double t) const;
  LoopAccount account() const;  // the loops so far (zeros where the threads are real)
  // From the first mark to the last: the wall time on one thread and the loops run
  double span_wall() const { return marks_.size() < 2 ? 0 : marks_.back().wall - marks_.front().wall; }
  LoopAccount span_loops() const {
    return marks_.size() < 2 ? LoopAccount{} : marks_.back().loops - marks_.front().loops;
  }

 private:
  struct Mark {
    double wall;
    LoopAccount loops;  // the account then: the loops so far saved inside_s - critical_s
  };
  const Backend& backend_;
  bool modelled_ = false;
  std::vector<Mark> marks_;
};

}  // namespace llmctl::bench
