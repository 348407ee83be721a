#include "engine/sched/scheduler.h"

#include <algorithm>
#include <span>
#include <string>

#include "engine/core/error.h"

namespace llmctl {

const char* to_string(SeqStatus s) {
  switch (s) {
    case SeqStatus::waiting: return "waiting";
    case SeqStatus::running: return "running";
    case SeqStatus::finished: return "finished";
    case SeqStatus::aborted: return "aborted";
  }
  return "?";
}

Scheduler::Scheduler(const SchedulerConfig& config, int num_blocks) : Scheduler(config, {num_blocks}, {0}) {}

Scheduler::Scheduler(const SchedulerConfig& config, const std::vector<int>& num_blocks, const std::vector<int>& windows)
    : cfg_(config), kv_(num_blocks, windows, config.block_size, config.enable_prefix_caching, config.kv_exact_slots) {
  LLM_CHECK(cfg_.max_num_seqs > 0) << "max_num_seqs must be positive";
  LLM_CHECK(cfg_.max_num_batched_tokens > 0) << "max_num_batched_tokens must be positive";
}

const std::shared_ptr<Sequence>& Scheduler::entry(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  LLM_CHECK(it != seqs_.end()) << "unknown request " << seq_id;
  return it->second;
}

std::shared_ptr<const Sequence> Scheduler::share(int64_t seq_id) const { return entry(seq_id); }
Sequence& Scheduler::seq(int64_t seq_id) { return *entry(seq_id); }
const Sequence& Scheduler::sequence(int64_t seq_id) const { return *entry(seq_id); }

void Scheduler::add(int64_t seq_id, std::vector<int32_t> prompt, int max_total_tokens, bool prefix_cache,
                    SeqOwner owner) {
  LLM_REQUIRE(!prompt.empty()) << "request " << seq_id << ": the prompt is empty";
  LLM_REQUIRE(max_total_tokens > int(prompt.size()))
      << "request " << seq_id << ": max_total_tokens " << max_total_tokens << " leaves no room after a prompt of "
      << prompt.size() << " tokens";
  // The last token is never computed, so max_total_tokens - 1 tokens need KV at most.
  std::string why;
  LLM_REQUIRE(kv_.can_hold(max_total_tokens - 1, cfg_.max_num_batched_tokens, &why))
      << "request " << seq_id << " needs up to " << why;
  LLM_REQUIRE(cfg_.chunked_prefill || max_total_tokens - 1 <= cfg_.max_num_batched_tokens)
      << "request " << seq_id << ": " << max_total_tokens - 1 << " tokens may need computing in one step, over "
      << "max_num_batched_tokens " << cfg_.max_num_batched_tokens << " (enable chunked prefill)";
  LLM_CHECK(!has(seq_id) && !aborted_in_flight_.count(seq_id)) << "request id " << seq_id << " is in use";
  auto shared = std::make_shared<Sequence>();
  Sequence& r = *shared;
  r.id = seq_id;
  r.owner = owner;
  r.arrival = next_arrival_++;
  r.prompt_len = int(prompt.size());
  r.tokens = std::move(prompt);
  r.max_total_tokens = max_total_tokens;
  r.prefix_cache = prefix_cache;
  seqs_.emplace(seq_id, std::move(shared));
  waiting_.push_back(seq_id);
}

void Scheduler::insert_running(int64_t seq_id) {
  const uint64_t a = seqs_.at(seq_id)->arrival;
  auto pos = std::upper_bound(running_.begin(), running_.end(), a,
                              [this](uint64_t x, int64_t id) { return x < seqs_.at(id)->arrival; });
  running_.insert(pos, seq_id);
}

void Scheduler::erase_running(int64_t seq_id) {
  auto it = std::find(running_.begin(), running_.end(), seq_id);
  LLM_CHECK(it != running_.end()) << "request " << seq_id << " is not running";
  running_.erase(it);
}

void Scheduler::finish(Sequence& r, SeqStatus state) {
  if (r.state == SeqStatus::running) erase_running(r.id);
  if (r.state == SeqStatus::waiting) waiting_.erase(std::find(waiting_.begin(), waiting_.end(), r.id));
  if (r.num_scheduled > 0) {
    --in_flight_;
    if (state == SeqStatus::aborted) aborted_in_flight_.insert(r.id);
  }
  kv_.free(r.id);
  ++(state == SeqStatus::aborted ? stats_.aborted : stats_.finished);
  r.state = state;
  r.num_scheduled = 0;
  const int64_t id = r.id;
  seqs_.erase(id);  // r lives on only where it was shared (share())
}

bool Scheduler::abort(int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return false;
  finish(*it->second, SeqStatus::aborted);
  return true;
}

void Scheduler::fork(int64_t parent, int64_t child, std::optional<int32_t> last_token, SeqOwner owner) {
  Sequence& p = seq(parent);
  LLM_CHECK(p.state == SeqStatus::running && p.num_scheduled == 0)
      << "fork of request " << parent << " that is " << to_string(p.state) << (p.num_scheduled ? " in flight" : "");
  LLM_CHECK(!has(child) && !aborted_in_flight_.count(child)) << "request id " << child << " is in use";
  LLM_CHECK(p.num_draft == 0) << "fork of request " << parent << " with unverified drafts";
  LLM_CHECK(!last_token || p.num_pending() >= 1) << "fork of " << parent << ": its last token is already computed";
  auto shared = std::make_shared<Sequence>(p);
  Sequence& c = *shared;
  c.id = child;
  c.owner = owner;
  c.arrival = next_arrival_++;
  c.num_preemptions = 0;
  if (last_token) c.tokens.back() = *last_token;
  kv_.fork(parent, child);
  seqs_.emplace(child, std::move(shared));
  insert_running(child);
}

void Scheduler::append_draft(int64_t seq_id, std::span<const int32_t> draft) {
  Sequence& r = seq(seq_id);
  LLM_CHECK(r.state == SeqStatus::running && r.num_scheduled == 0)
      << "drafts for request " << seq_id << " that is " << to_string(r.state) << (r.num_scheduled ? " in flight" : "");
  LLM_CHECK(int64_t(r.tokens.size()) + int64_t(draft.size()) < r.max_total_tokens)
      << "request " << seq_id << ": " << draft.size() << " drafts after " << r.tokens.size()
      << " tokens reach max_total_tokens " << r.max_total_tokens;
  LLM_CHECK(r.num_draft + int64_t(draft.size()) + 1 <= cfg_.max_num_batched_tokens)
      << "request " << seq_id << ": " << r.num_draft + draft.size() << " drafts and their last verified token do not "
      << "fit one step of max_num_batched_tokens " << cfg_.max_num_batched_tokens << " (they are verified together)";
  r.tokens.insert(r.tokens.end(), draft.begin(), draft.end());
  r.num_draft += int(draft.size());
}

int Scheduler::chunk_size(const Sequence& r, int budget) const {
  const int pending = r.num_pending();
  if (pending <= budget) return pending;
  if (!cfg_.chunked_prefill) return 0;  // must fit whole
  // A chunk ends before the verification window [verify_start, N): drafts are verified in one step.
  return std::max(0, std::min(budget, r.verify_start() - r.num_computed));
}

void Scheduler::put(Sequence& r, int num_new, SchedulerOutput& out, int& budget) {
  LLM_CHECK(num_new > 0 && num_new <= budget && r.num_scheduled == 0) << "bad chunk for request " << r.id;
  const bool samples = r.num_computed + num_new == int(r.tokens.size());
  LLM_CHECK(samples || r.num_computed + num_new <= r.verify_start())
      << "request " << r.id << ": chunk ends inside its draft verification window";
  out.seqs.push_back({r.id, r.owner, r.num_computed, num_new, samples, samples ? r.num_draft : 0});
  out.num_tokens += num_new;
  r.num_scheduled = num_new;
  budget -= num_new;
  ++in_flight_;
}

void Scheduler::preempt(int64_t seq_id, SchedulerOutput& out, int& budget) {
  Sequence& v = seq(seq_id);
  if (v.num_scheduled > 0) {  // scheduled earlier in this step: take it out again
    std::erase_if(out.seqs, [&](const ScheduledSeq& s) { return s.seq_id == seq_id; });
    out.num_tokens -= v.num_scheduled;
    budget += v.num_scheduled;
    v.num_scheduled = 0;
    --in_flight_;
  }
  kv_.free(seq_id);
  erase_running(seq_id);
  v.state = SeqStatus::waiting;
  v.num_computed = 0;
  v.tokens.resize(v.tokens.size() - size_t(v.num_draft));  // drafts are proposed again after recompute
  v.num_draft = 0;
  ++v.num_preemptions;
  waiting_.push_front(seq_id);
  out.preempted.push_back(seq_id);
  ++stats_.preemptions;
}

bool Scheduler::reserve(Sequence& r, int total_tokens, SchedulerOutput& out, int& budget,
                        const std::unordered_set<int64_t>& in_flight_before) {
  while (!kv_.ensure_capacity(r.id, total_tokens)) {
    LLM_CHECK(!running_.empty()) << "no running sequence to preempt";
    auto youngest = std::find_if(running_.rbegin(), running_.rend(),
                                 [&](int64_t id) { return !in_flight_before.count(id); });
    if (youngest == running_.rend()) return false;  // all in flight: r waits for a later step
    const int64_t victim = *youngest;
    preempt(victim, out, budget);
    if (victim == r.id) return false;
  }
  return true;
}

bool Scheduler::prefix_in_progress(const Sequence& r) const {
  if (!kv_.prefix_caching()) return false;
  const int B = kv_.block_size();
  const int first = kv_.peek_cached_tokens(r.tokens) / B;  // first full block not found in the cache
  if ((first + 1) * B > int(r.tokens.size())) return false;
  // Chain hash of that block, compared with the uncomputed full blocks of running sequences.
  auto chain = [B](const std::vector<int32_t>& t, int upto, std::vector<uint64_t>& out) {
    uint64_t h = BlockPool::kRootHash;
    for (int i = 0; i <= upto; ++i) {
      h = BlockPool::hash_block(h, std::span<const int32_t>(t.data() + size_t(i) * B, B));
      out.push_back(h);
    }
  };
  std::vector<uint64_t> mine, theirs;
  chain(r.tokens, first, mine);
  for (int64_t id : running_) {
    const Sequence& o = *seqs_.at(id);
    const int done = o.num_computed / B, full = int(o.tokens.size()) / B;
    if (full <= first || done > first) continue;  // its block `first` is computed or does not exist
    theirs.clear();
    chain(o.tokens, first, theirs);
    if (theirs.back() == mine.back()) return true;
  }
  return false;
}

SchedulerOutput Scheduler::schedule(const ScheduleLimits& limits) {
  LLM_CHECK(in_flight_ == 0 || limits.steps_in_flight)
      << in_flight_ << " sequences of the last step still await on_step_done";
  if (in_flight_ == 0) aborted_in_flight_.clear();
  std::unordered_set<int64_t> in_flight_before;  // sequences of earlier steps: not in this one
  for (int64_t id : running_)
    if (seqs_.at(id)->num_scheduled > 0) in_flight_before.insert(id);
  SchedulerOutput out;
  int budget = cfg_.max_num_batched_tokens;
  const size_t max_seqs =
      size_t(limits.max_seqs > 0 ? std::min(limits.max_seqs, cfg_.max_num_seqs) : cfg_.max_num_seqs);

  // 1. sequences one step from sampling (pending = last verified token + drafts), then 2. the others;
  // oldest first. Victims are taken from the back.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < running_.size(); ++i) {
      if (out.seqs.size() >= max_seqs || budget == 0) break;
      Sequence& r = seq(running_[i]);
      LLM_CHECK(r.num_pending() >= 1) << "running request " << r.id << " has nothing to compute";
      const bool near_sampling = r.num_computed == r.verify_start();
      if (r.num_scheduled > 0 || near_sampling != (pass == 0)) continue;
      const int n = chunk_size(r, budget);
      if (n == 0) continue;  // nothing of it fits this step
      if (!reserve(r, r.num_computed + n, out, budget, in_flight_before)) continue;  // r preempted itself, or waits
      put(r, n, out, budget);
    }
  }

  // 3. admit waiting requests FCFS (not in a step that had to preempt: memory is short).
  while (out.preempted.empty() && !waiting_.empty() && budget > 0 && out.seqs.size() < max_seqs &&
         running_.size() < size_t(cfg_.max_num_seqs)) {
    Sequence& r = seq(waiting_.front());
    const int n_total = int(r.tokens.size());
    const int peek = r.prefix_cache ? kv_.peek_cached_tokens(r.tokens) : 0;
    if (!cfg_.chunked_prefill && n_total - peek > budget) break;
    if (cfg_.defer_shared_prefill && r.prefix_cache && prefix_in_progress(r)) break;
    const std::optional<int> cached = kv_.allocate_prompt(r.id, r.tokens, r.prefix_cache, budget);
    if (!cached) break;  // its blocks cannot be had yet: nobody overtakes it
    waiting_.pop_front();
    r.state = SeqStatus::running;
    r.num_computed = *cached;
    insert_running(r.id);
    ++stats_.admitted;
    put(r, std::min(n_total - *cached, budget), out, budget);
  }

  out.block_copies = kv_.take_pending_copies();
  if (!out.empty()) out.exact_copies = kv_.take_pending_exact_copies();  // they travel in the step's plan
  if (!out.empty()) {
    ++stats_.steps;
    stats_.scheduled_tokens += out.num_tokens;
  }
  return out;
}

bool Scheduler::on_step_done(int64_t seq_id, std::optional<int32_t> sampled, bool finished) {
  StepOutcome o;
  o.appended = sampled ? std::span<const int32_t>(&*sampled, 1) : std::span<const int32_t>();
  o.finished = finished;
  return step_done(seq_id, o, false);
}

bool Scheduler::on_step_done(int64_t seq_id, const StepOutcome& o) { return step_done(seq_id, o, true); }

bool Scheduler::step_done(int64_t seq_id, const StepOutcome& o, bool drafts_reported) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) {
    LLM_CHECK(aborted_in_flight_.erase(seq_id)) << "on_step_done for request " << seq_id << " not in this step";
    return true;
  }
  Sequence& r = *it->second;
  LLM_CHECK(r.num_scheduled > 0) << "on_step_done for request " << seq_id << " that was not scheduled";
  // Checked before anything changes.
  const bool samples = r.num_computed + r.num_scheduled == int(r.tokens.size());
  LLM_CHECK(drafts_reported || !samples || r.num_draft == 0)
      << "request " << seq_id << " verified drafts this step: report how many were accepted";
  LLM_CHECK(o.num_accepted >= 0 && o.num_accepted <= (samples ? r.num_draft : 0))
      << "request " << seq_id << ": " << o.num_accepted << " drafts accepted, but the step verified "
      << (samples ? r.num_draft : 0);
  LLM_CHECK(o.appended.empty() || samples) << "request " << seq_id << " got a token from a step that did not sample it";
  LLM_CHECK(!o.appended.empty() || !samples || o.finished)
      << "request " << seq_id << " sampled this step but got no token";
  LLM_CHECK(int64_t(r.tokens.size()) - (r.num_draft - o.num_accepted) + int64_t(o.appended.size()) <= r.max_total_tokens)
      << "request " << seq_id << ": " << o.appended.size() << " new tokens go past max_total_tokens " << r.max_total_tokens;
  r.num_computed += r.num_scheduled;
  r.num_scheduled = 0;
  --in_flight_;
  if (samples) {  // the drafts were verified: cut the rejected ones, roll back their KV
    const int rejected = r.num_draft - o.num_accepted;
    r.num_draft = 0;
    if (rejected > 0) {
      r.tokens.resize(r.tokens.size() - size_t(rejected));
      r.num_computed = int(r.tokens.size());
      kv_.truncate(r.id, r.num_computed);  // before the commit: rejected tokens are never hashed
    }
  }
  kv_.commit_tokens(r.id, r.tokens, r.num_computed);
  r.tokens.insert(r.tokens.end(), o.appended.begin(), o.appended.end());
  if (o.finished || int(r.tokens.size()) >= r.max_total_tokens) {
    finish(r, SeqStatus::finished);
    return true;
  }
  return false;
}

void Scheduler::check_invariants() const {
  kv_.check_invariants();
  LLM_CHECK(waiting_.size() + running_.size() == seqs_.size()) << "queues disagree with the request table";
  LLM_CHECK(kv_.num_seqs() == int(running_.size())) << "block tables exist for non-running requests";
  int in_flight = 0;
  for (int64_t id : waiting_) {
    const Sequence& r = sequence(id);
    LLM_CHECK(r.state == SeqStatus::waiting && r.num_computed == 0 && r.num_scheduled == 0 && r.num_draft == 0 &&
              !kv_.has(id))
        << "waiting request " << id << " holds state";
  }
  for (size_t i = 0; i < running_.size(); ++i) {
    const Sequence& r = sequence(running_[i]);
    LLM_CHECK(r.state == SeqStatus::running && kv_.has(r.id)) << "running request " << r.id << " has no blocks";
    LLM_CHECK(kv_.num_computed(r.id) == r.num_computed) << "request " << r.id << " computed count disagrees";
    LLM_CHECK(r.num_computed + r.num_scheduled <= kv_.table_blocks(r.id) * kv_.block_size())
        << "request " << r.id << " scheduled beyond its blocks";
    LLM_CHECK(r.num_pending() >= 1 && int(r.tokens.size()) < r.max_total_tokens) << "request " << r.id << " should be done";
    LLM_CHECK(r.num_draft >= 0 && r.num_computed <= r.verify_start())
        << "request " << r.id << ": drafts computed without being verified";
    LLM_CHECK(i == 0 || sequence(running_[i - 1]).arrival < r.arrival) << "running queue out of arrival order";
    in_flight += r.num_scheduled > 0;
  }
  LLM_CHECK(in_flight == in_flight_) << "in-flight count disagrees";
}

}  // namespace llmctl
