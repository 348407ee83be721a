#include "bench/thread_model_clock.h"

#include <algorithm>
#include <chrono>

namespace llmctl::bench {

ThreadModelClock::ThreadModelClock(const Backend& backend)
    : backend_(backend), modelled_(backend.thread_model_account().has_value()) {}

LoopAccount ThreadModelClock::account() const { return backend_.thread_model_account().value_or(LoopAccount{}); }

void ThreadModelClock::mark() {
  if (!modelled_) return;
  const LoopAccount loops = account();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  marks_.push_back({wall, loops});
}

double ThreadModelClock::at(double t) const {
  if (marks_.empty()) return t;
  // the first mark at or after t: the step t was taken in ended there
  auto it = std::lower_bound(marks_.begin(), marks_.end(), t, [](const Mark& m, double v) { return m.wall < v; });
  if (it == marks_.end()) --it;
  return t - (it->loops.inside_s - it->loops.critical_s);
}

}  // namespace llmctl::bench
