// Bounds on rendering an untrusted chat template (they arrive with model files): nesting and
// recursion depth, loop iterations, evaluation steps, output and value size, time and
// cancellation. The Budget of the render running on a thread is reachable from the builtins, so
// filters and operators can charge their work without an extra parameter everywhere.
#pragma once
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace llmctl {

// Per render. Exceeding any limit is an InputError naming the limit and the template line.
struct RenderLimits {
  // Evaluation recursion: nested expressions and statements plus macro calls (a macro calling
  // itself); also the nesting of values that are printed, compared or serialized.
  int max_depth = 256;
  int64_t max_loop_iterations = 1'000'000;  // all for-loops of the render together
  // Expressions and statements evaluated, plus the work of builtins: one step per item made or
  // scanned and per 64 bytes of string produced.
  int64_t max_steps = 10'000'000;
  // The rendered text; also any one string or list the template builds (repetition, join, ...).
  size_t max_output_bytes = size_t(64) << 20;
  std::optional<std::chrono::steady_clock::time_point> deadline;
  const std::atomic<bool>* cancel = nullptr;  // rendering stops once it reads true
};

// Nesting of a template's syntax (parentheses, blocks, operator chains), checked when parsing.
inline constexpr int kMaxTemplateNesting = 256;

namespace jinja {

struct DictData;

// The limits and counters of one render. Construction makes it the current budget of this thread
// (restoring the previous one when destroyed).
class Budget {
 public:
  explicit Budget(const RenderLimits& limits);
  ~Budget();
  Budget(const Budget&) = delete;
  Budget& operator=(const Budget&) = delete;

  static Budget* current();
  const RenderLimits& limits() const { return limits_; }

  void step(int64_t n = 1) {
    if (__builtin_add_overflow(steps_, n, &steps_)) steps_ = INT64_MAX;
    if (steps_ >= next_check_) check_slow();
  }
  void loop_iteration();
  // Namespaces are the only mutable values, hence the only way to a reference cycle; they are
  // emptied when the render ends so every cycle is broken.
  void adopt_namespace(std::shared_ptr<DictData> ns) { namespaces_.push_back(std::move(ns)); }

 private:
  void check_slow();

  RenderLimits limits_;
  int64_t steps_ = 0, next_check_ = 0, loops_ = 0;
  std::vector<std::shared_ptr<DictData>> namespaces_;
  Budget* previous_;
};

// Work of a builtin: `steps` items, or `bytes` of string. No-ops outside a render.
void charge(int64_t steps);
void charge_bytes(size_t bytes);
// A string or list of `bytes` is about to be built by `what` ("'*'", "join"): fails when it would
// exceed max_output_bytes (the default limit outside a render).
void check_size(size_t bytes, const char* what);
size_t max_value_bytes();

// RAII counter of recursion: Eval for the interpreter (statements, expressions, macro calls),
// Value for walks over nested values (repr, ==, <, tojson, JSON input). Throws past max_depth.
// `weight`: levels this frame counts for, for frames far bigger than an eval() level.
class DepthGuard {
 public:
  enum Kind { Eval, Value };
  explicit DepthGuard(Kind kind, int weight = 1);
  ~DepthGuard();
  DepthGuard(const DepthGuard&) = delete;
  DepthGuard& operator=(const DepthGuard&) = delete;

 private:
  int* counter_;
  int weight_;
};

}  // namespace jinja
}  // namespace llmctl
