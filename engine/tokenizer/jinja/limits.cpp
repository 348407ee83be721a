#include "engine/tokenizer/jinja/limits.h"

#include <algorithm>

#include "engine/tokenizer/jinja/value.h"

namespace llmctl::jinja {

namespace {

thread_local Budget* t_current = nullptr;
thread_local int t_eval_depth = 0;
thread_local int t_value_depth = 0;

// Time and cancellation are read every this many steps: cheap, and still well under a millisecond.
constexpr int64_t kCheckEvery = 1024;
constexpr size_t kBytesPerStep = 64;

const RenderLimits& active_limits() {
  static const RenderLimits defaults;
  return t_current ? t_current->limits() : defaults;
}

}  // namespace

Budget::Budget(const RenderLimits& limits) : limits_(limits), previous_(t_current) { t_current = this; }

Budget::~Budget() {
  t_current = previous_;
  for (auto& ns : namespaces_) {
    auto items = std::move(ns->items);  // freed here, after the render dropped its own references
    ns->items.clear();
  }
}

Budget* Budget::current() { return t_current; }

void Budget::loop_iteration() {
  if (++loops_ > limits_.max_loop_iterations)
    JINJA_FAIL() << "template exceeded the loop iteration limit (max_loop_iterations = "
                 << limits_.max_loop_iterations << ")";
  step();
}

void Budget::check_slow() {
  if (steps_ > limits_.max_steps || steps_ == INT64_MAX)
    JINJA_FAIL() << "template exceeded the evaluation step limit (max_steps = " << limits_.max_steps << ")";
  if (limits_.cancel && limits_.cancel->load(std::memory_order_relaxed))
    JINJA_FAIL() << "chat template rendering was cancelled";
  if (limits_.deadline && std::chrono::steady_clock::now() >= *limits_.deadline)
    JINJA_FAIL() << "chat template rendering ran past its deadline";
  // Next look: kCheckEvery steps on, or just past the step limit if that comes first.
  const int64_t max = limits_.max_steps;
  next_check_ = max - steps_ >= kCheckEvery ? steps_ + kCheckEvery : max == INT64_MAX ? max : max + 1;
}

void charge(int64_t steps) {
  if (t_current && steps > 0) t_current->step(steps);
}

void charge_bytes(size_t bytes) {
  if (t_current && bytes >= kBytesPerStep) t_current->step(static_cast<int64_t>(bytes / kBytesPerStep));
}

size_t max_value_bytes() { return active_limits().max_output_bytes; }

void check_size(size_t bytes, const char* what) {
  const size_t max = active_limits().max_output_bytes;
  if (bytes > max)
    JINJA_FAIL() << what << " would make a value of " << bytes << " bytes, over the limit (max_output_bytes = " << max
                 << ")";
  charge_bytes(bytes);
}

DepthGuard::DepthGuard(Kind kind, int weight)
    : counter_(kind == Eval ? &t_eval_depth : &t_value_depth), weight_(weight) {
  const int max = active_limits().max_depth;
  if ((*counter_ += weight) > max) {
    *counter_ -= weight;
    if (kind == Eval)
      JINJA_FAIL() << "template recursion is deeper than the limit (max_depth = " << max
                   << "): nested expressions, or a macro that keeps calling itself";
    JINJA_FAIL() << "value is nested deeper than the limit (max_depth = " << max << ")";
  }
}

DepthGuard::~DepthGuard() { *counter_ -= weight_; }

}  // namespace llmctl::jinja
