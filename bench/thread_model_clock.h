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

 private:
  struct Mark {
    double wall, saved;
  };
  const Backend& backend_;
  bool modelled_ = false;
  std::vector<Mark> marks_;
};

}  // namespace llmctl::bench
