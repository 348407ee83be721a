// EngineLoop: the one thread that owns the Engine. HTTP threads hand it Jobs (one per HTTP
// request, one engine request per prompt) and read the Job's events; nothing they do can stop the
// loop, and the Engine is never touched from their threads.
//
// Job events, in order: accepted | rejected (once, before anything else), then deltas and one
// finished per prompt, or failed (timeout, shutdown, engine error) at any point after accepted.
// Job states: queued (in the inbox) -> running (submitted to the engine) -> done; cancel() from
// the HTTP side (client gone) aborts the engine requests at the next loop iteration.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "server/metrics.h"

namespace llmctl::server {

struct JobEvent {
  enum Kind { accepted, rejected, delta, finished, failed } kind = delta;
  int prompt_index = 0;
  // delta: one sequence's new text and tokens (see StreamEvent)
  int index = 0;
  std::string text;
  std::vector<int> token_ids;
  std::vector<TokenLogprobs> logprobs;
  bool done = false;
  std::string finish_reason;
  std::optional<RequestResult> result;  // finished
  int status = 0;                       // rejected / failed: the HTTP status it stands for
  std::string message;                  // rejected / failed
};

class Job {
 public:
  Job(std::vector<std::vector<int>> prompts, SamplingParams params, double timeout_s)
      : prompts(std::move(prompts)), params(std::move(params)), timeout_s(timeout_s) {}
  const std::vector<std::vector<int>> prompts;
  const SamplingParams params;
  const double timeout_s;  // 0 = none
  bool counted = true;     // false: left out of the metrics

  // The next event; false when none came within wait_s seconds.
  bool next(JobEvent& e, double wait_s);
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

 private:
  friend class EngineLoop;
  void push(JobEvent e);
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<JobEvent> events_;
  std::atomic<bool> cancelled_{false};
  // engine side only
  std::vector<int64_t> ids_;
  std::vector<bool> done_;
  double deadline_ = 0;
  bool ended_ = false;
};

class EngineLoop {
 public:
  EngineLoop(Engine& engine, Metrics& metrics);
  ~EngineLoop();
  // Starts the thread and a one-token warm-up request; ready() turns true after a successful step.
  void start();
  // counted false: the job is left out of the metrics (the start-up warm-up).
  std::shared_ptr<Job> submit(std::vector<std::vector<int>> prompts, const SamplingParams& params, double timeout_s,
                              bool counted = true);
  // Wakes the loop so that a cancelled job is aborted now.
  void notify();
  // Ends every job with a failed event (503, "the server is shutting down") and stops the thread.
  void shutdown();
  bool ready() const { return ready_; }

 private:
  void run();
  void start_job(const std::shared_ptr<Job>& job);
  void end_job(Job& job, int status, const std::string& message);  // aborts what still runs
  void collect_finished(Job& job);
  void update_gauges();

  Engine& engine_;
  Metrics& metrics_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<Job>> inbox_;
  bool stop_ = false;
  std::atomic<bool> ready_{false};
  std::vector<std::shared_ptr<Job>> active_;  // engine thread only
  EngineStats seen_;  // the engine's counters at the last update_gauges (metrics add the difference)
  std::thread thread_;
};

}  // namespace llmctl::server
