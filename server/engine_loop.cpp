#include "server/engine_loop.h"

#include <chrono>
#include <cstdio>

#include "engine/core/error.h"

namespace llmctl::server {

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}
}  // namespace

bool Job::next(JobEvent& e, double wait_s) {
  std::unique_lock<std::mutex> l(mu_);
  if (!cv_.wait_for(l, std::chrono::duration<double>(wait_s), [&] { return !events_.empty(); })) return false;
  e = std::move(events_.front());
  events_.pop_front();
  return true;
}

void Job::push(JobEvent e) {
  {
    std::lock_guard<std::mutex> l(mu_);
    events_.push_back(std::move(e));
  }
  cv_.notify_all();
}

EngineLoop::EngineLoop(Engine& engine, Metrics& metrics) : engine_(engine), metrics_(metrics) {}

EngineLoop::~EngineLoop() { shutdown(); }

void EngineLoop::start() {
  thread_ = std::thread([this] { run(); });
  SamplingParams warm;
  warm.temperature = 0;
  warm.max_tokens = 1;
  submit({{0}}, warm, 0, false);
}

std::shared_ptr<Job> EngineLoop::submit(std::vector<std::vector<int>> prompts, const SamplingParams& params,
                                        double timeout_s, bool counted) {
  auto job = std::make_shared<Job>(std::move(prompts), params, timeout_s);
  job->counted = counted;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_) {
      job->push(JobEvent{.kind = JobEvent::rejected, .status = 503, .message = "the server is shutting down"});
      return job;
    }
    inbox_.push_back(job);
  }
  cv_.notify_all();
  return job;
}

void EngineLoop::notify() { cv_.notify_all(); }

void EngineLoop::shutdown() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void EngineLoop::start_job(const std::shared_ptr<Job>& job) {
  Job& j = *job;
  try {
    for (size_t p = 0; p < j.prompts.size(); ++p) {
      std::weak_ptr<Job> weak = job;
      const int prompt_index = int(p);
      auto on_event = [weak, prompt_index](const StreamEvent& se) {
        auto jp = weak.lock();
        if (!jp) return;
        JobEvent e;
        e.kind = JobEvent::delta;
        e.prompt_index = prompt_index;
        e.index = se.index;
        e.text = std::string(se.text);
        e.token_ids.assign(se.token_ids.begin(), se.token_ids.end());
        e.logprobs.assign(se.logprobs.begin(), se.logprobs.end());
        e.done = se.done;
        e.finish_reason = std::string(se.finish_reason);
        jp->push(std::move(e));
      };
      j.ids_.push_back(engine_.submit(j.prompts[p], j.params, on_event));
      j.done_.push_back(false);
    }
  } catch (const std::exception& e) {
    for (int64_t id : j.ids_) {
      engine_.abort(id);
      engine_.take_result(id);
    }
    j.ended_ = true;
    j.push(JobEvent{.kind = JobEvent::rejected, .status = 400, .message = e.what()});
    return;
  }
  j.deadline_ = j.timeout_s > 0 ? now_seconds() + j.timeout_s : 0;
  j.push(JobEvent{.kind = JobEvent::accepted});
  active_.push_back(job);
}

void EngineLoop::end_job(Job& j, int status, const std::string& message) {
  for (size_t p = 0; p < j.ids_.size(); ++p)
    if (!j.done_[p]) {
      engine_.abort(j.ids_[p]);
      engine_.take_result(j.ids_[p]);
      j.done_[p] = true;
    }
  j.ended_ = true;
  if (status) j.push(JobEvent{.kind = JobEvent::failed, .status = status, .message = message});
}

void EngineLoop::collect_finished(Job& j) {
  bool all = true;
  for (size_t p = 0; p < j.ids_.size(); ++p) {
    if (j.done_[p]) continue;
    std::optional<RequestResult> r = engine_.take_result(j.ids_[p]);
    if (!r) {
      all = false;
      continue;
    }
    j.done_[p] = true;
    if (!r->error.empty()) {  // one of its sequences failed: this job alone ends with the error
      end_job(j, 500, "engine error: " + r->error);
      return;
    }
    int64_t generated = 0;
    std::string reason = "length";
    for (const auto& o : r->outputs) {
      generated += int64_t(o.token_ids.size());
      if (o.finish_reason == "stop") reason = "stop";
    }
    const double ttft = r->first_token_seconds > 0 ? r->first_token_seconds - r->submit_seconds : -1;
    const double tpot = generated > int64_t(r->outputs.size()) && r->first_token_seconds > 0
                            ? (r->finish_seconds - r->first_token_seconds) / double(generated - int64_t(r->outputs.size()))
                            : -1;
    if (j.counted)
      metrics_.request_done(reason, ttft, tpot, r->finish_seconds - r->submit_seconds, int64_t(r->prompt_ids.size()),
                          generated);
    JobEvent e;
    e.kind = JobEvent::finished;
    e.prompt_index = int(p);
    e.result = std::move(r);
    j.push(std::move(e));
  }
  if (all) j.ended_ = true;
}

void EngineLoop::update_gauges() {
  const EngineStats s = engine_.stats();
  metrics_.set_gauges(engine_.num_running_requests(), engine_.scheduler().num_waiting(), s.kv.usage,
                      s.kv.prefix_hit_rate);
  metrics_.add_step_counts(s.preemptions - seen_.preemptions, s.draft_tokens - seen_.draft_tokens,
                           s.accepted_draft_tokens - seen_.accepted_draft_tokens,
                           s.jump_forward_tokens - seen_.jump_forward_tokens);
  seen_ = s;
}

void EngineLoop::run() {
  for (;;) {
    std::vector<std::shared_ptr<Job>> incoming;
    bool stopping;
    {
      std::unique_lock<std::mutex> l(mu_);
      // Idle: sleep until a job comes; with work, look at the inbox without waiting. The timed
      // wait lets cancelled or expired jobs be noticed even when nobody notifies.
      if (!engine_.has_unfinished())
        cv_.wait_for(l, std::chrono::milliseconds(200), [&] { return stop_ || !inbox_.empty(); });
      incoming.swap(inbox_);
      stopping = stop_;
    }
    if (stopping) {
      for (auto& job : incoming)
        job->push(JobEvent{.kind = JobEvent::rejected, .status = 503, .message = "the server is shutting down"});
      for (auto& job : active_) end_job(*job, 503, "the server is shutting down");
      active_.clear();
      update_gauges();
      return;
    }
    for (auto& job : incoming) start_job(job);
    const double now = now_seconds();
    for (auto& job : active_) {
      if (job->ended_) continue;
      if (job->cancelled())
        end_job(*job, 0, "");
      else if (job->deadline_ > 0 && now > job->deadline_)
        end_job(*job, 408, "the request ran past the server's request timeout (" + seconds_text(job->timeout_s) + " s)");
    }
    if (engine_.has_unfinished()) {
      try {
        const bool ran = engine_.step();
        if (ran) ready_ = true;
        LLM_CHECK(ran || !engine_.has_unfinished()) << "the engine stalled with unfinished requests";
      } catch (const std::exception& e) {
        // An engine failure ends every running request with an error; the loop goes on.
        for (auto& job : active_)
          if (!job->ended_) end_job(*job, 500, std::string("engine error: ") + e.what());
      }
    }
    for (auto& job : active_)
      if (!job->ended_) collect_finished(*job);
    std::erase_if(active_, [](const std::shared_ptr<Job>& j) { return j->ended_; });
    update_gauges();
  }
}

}  // namespace llmctl::server
