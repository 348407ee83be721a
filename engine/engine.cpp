#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <type_traits>

#include "engine/core/error.h"
#include "engine/draft_planner.h"
#include "engine/sched/batch_builder.h"

namespace llmctl {

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

Engine::Engine(Executor& executor, const Tokenizer& tokenizer, EngineConfig config)
    : exec_(executor), tok_(tokenizer), cfg_(config) {
  const ModelConfig& mc = exec_.config();
  LLM_REQUIRE(tok_.vocab_size() > 0 && tok_.vocab_size() <= mc.vocab_size)
      << "the tokenizer has " << tok_.vocab_size() << " tokens but the model's vocabulary has " << mc.vocab_size
      << ": the tokenizer does not belong to this model";
  sample_vocab_ = tok_.vocab_size();  // the model's padding rows past it are never drawn
  max_context_ = cfg_.max_context > 0 ? std::min(cfg_.max_context, mc.max_position_embeddings)
                                      : mc.max_position_embeddings;
  exec_.check_context(max_context_);
  exec_.tune(cfg_.sched.max_num_batched_tokens, cfg_.sched.max_num_seqs);
  LLM_REQUIRE(cfg_.num_speculative_tokens >= 0) << "num_speculative_tokens must be >= 0, not "
                                                << cfg_.num_speculative_tokens;
  KvCacheRequest kr;
  kr.bytes = cfg_.kv_cache_bytes;
  kr.num_blocks = cfg_.num_blocks;
  kr.gpu_memory_utilization = cfg_.gpu_memory_utilization;
  kr.block_size = cfg_.sched.block_size;
  kr.max_seqs = cfg_.sched.max_num_seqs;
  kr.max_batched_tokens = cfg_.sched.max_num_batched_tokens;
  kr.draft_tokens = cfg_.proposer ? cfg_.num_speculative_tokens : 0;
  kv_ = plan_kv_cache(exec_, kr);
  cfg_.sched.kv_exact_slots = kv_.spec.exact_ring_blocks > 0;
  sched_ = std::make_unique<Scheduler>(cfg_.sched, kv_.layout.num_blocks, kv_.layout.windows);
  exec_.alloc_kv_cache(kv_.spec, kv_.layout);
  eos_ids_ = mc.eos_token_ids;
  if (tok_.eos_id() >= 0 && std::find(eos_ids_.begin(), eos_ids_.end(), tok_.eos_id()) == eos_ids_.end())
    eos_ids_.push_back(tok_.eos_id());
}

Engine::~Engine() {
  // The executor pairs every submit with a collect: steps still in flight are collected (their
  // tokens dropped) before it serves another engine or shuts down.
  try {
    while (!in_flight_.empty()) {
      exec_.collect();
      in_flight_.pop_front();
    }
  } catch (...) {
  }
}

std::string Engine::describe_kv_cache() const {
  return llmctl::describe_kv_cache(kv_.spec, kv_.layout, kv_.group_layers);
}

int64_t Engine::submit(std::vector<int> prompt, const SamplingParams& params, StreamFn on_text) {
  const int vocab = exec_.config().vocab_size;
  params.validate(vocab);
  LLM_REQUIRE(!prompt.empty()) << "the prompt is empty";
  // Prompt ids are the tokenizer's (they are decoded for echo and prompt logprobs), as vLLM checks.
  for (int id : prompt)
    LLM_REQUIRE(id >= 0 && id < sample_vocab_) << "prompt token id " << id << " is outside the vocabulary (" << sample_vocab_
                                              << " tokens)";
  LLM_REQUIRE(int64_t(prompt.size()) + params.max_tokens <= max_context_)
      << "the prompt has " << prompt.size() << " tokens and max_tokens is " << params.max_tokens << ": together over the "
      << max_context_ << "-token context";
  LLM_REQUIRE(params.num_generated_sequences() <= 128) << "n and best_of must be at most 128";
  std::string why;  // (prompt + max_tokens is within max_context, an int)
  LLM_REQUIRE(sched_->kv().can_hold(int(prompt.size()) + params.max_tokens, cfg_.sched.max_num_batched_tokens, &why))
      << "the request needs " << why;

  auto r = std::make_unique<EngineRequest>();
  r->id = next_id_++;
  r->params = params;
  r->seed = params.seed ? *params.seed : std::random_device{}();
  r->prompt_len = int(prompt.size());
  r->on_text = std::move(on_text);
  r->init_sequences(prompt, eos_ids_);
  r->result.id = r->id;
  r->result.submit_seconds = now_seconds();
  const int64_t seq0 = next_seq_id_++;
  r->seqs[0].seq_id = seq0;
  if (params.prompt_logprobs) r->result.prompt_logprobs.resize(prompt.size());
  // Prompt logprobs need the logits of every prompt position: no prefix-cache hits for it. The
  // prompt moves into the scheduler's Sequence, which the request shares (tokens stored once).
  static_assert(std::is_same_v<std::vector<int>, std::vector<int32_t>>);
  sched_->add(seq0, std::move(prompt), r->prompt_len + params.max_tokens, !params.prompt_logprobs, SeqOwner{r->id, 0});
  r->seqs[0].seq = sched_->share(seq0);
  stats_.prompt_tokens += int64_t(r->prompt_len);
  const int64_t id = r->id;
  requests_[id] = std::move(r);
  return id;
}


// Which sequences get drafts: running ones that are decoding (their one pending token is their
// last sampled one, no drafts yet), oldest first, within the step's token budget. None for:
//  - a request with n > 1 / best_of before its fork: its first step draws every child from the
//    prompt's one row (the children get drafts once forked);
//  - a sequence with no generated token yet, or recomputing after preemption (more than one token
//    pending): its prompt rows, prompt logprobs included, are planned as without drafts;
//  - a request under a grammar (params.constraint): each row would need the mask after the drafts
//    before it (a matcher advanced and rolled back), not built yet.
// Everything else is verified exactly: host draws (logprobs, best_of ranking, penalties) run row by
// row on the state they would have; device draws get the state drafts 0..j-1 lead to (sample_step).
void Engine::propose_drafts() {
  const int k = cfg_.num_speculative_tokens;
  if (!cfg_.proposer || k <= 0) return;
  std::vector<int64_t> decoding;
  for (const auto& [id, r] : requests_) {
    if ((!r->forked && r->seqs.size() > 1) || r->params.constraint) continue;
    for (const EngineSequence& s : r->seqs) {
      if (s.done || s.seq_id < 0 || !sched_->has(s.seq_id)) continue;
      const Sequence& q = sched_->sequence(s.seq_id);
      if (q.state == SeqStatus::running && q.num_draft == 0 && q.num_pending() == 1 && q.num_generated() >= 1)
        decoding.push_back(s.seq_id);
    }
  }
  llmctl::propose_drafts(*sched_, *cfg_.proposer, std::move(decoding),
                         DraftLimits{k, cfg_.sched.max_num_batched_tokens, cfg_.sched.max_num_seqs, sample_vocab_});
}

// One step at a time, or with pipeline stages several (Executor::max_steps_in_flight): steps are
// launched (scheduled, planned, submitted) while fewer than that are in flight and there is work
// for them, then the oldest is finished (its logits drawn, its sequences advanced). A launched
// step's requests stay alive until it is finished (Request::steps_in_flight).
struct Engine::InFlight {
  SchedulerOutput out;
  StepPlan plan;                     // points into out.seqs and the requests
  std::vector<int64_t> request_ids;  // each request with a sequence in it, once
  double t0 = 0;
};

EngineRequest& Engine::owner(const ScheduledSeq& ss) {
  auto it = requests_.find(ss.owner.request_id);
  LLM_CHECK(it != requests_.end() && ss.owner.index < int(it->second->seqs.size()) &&
            it->second->seqs[size_t(ss.owner.index)].seq_id == ss.seq_id)
      << "engine: scheduled sequence " << ss.seq_id << " has no owner";
  return *it->second;
}

int Engine::steps_in_flight_limit() const {
  // Drafts are proposed for sequences between their steps: one step at a time with a proposer.
  return cfg_.proposer && cfg_.num_speculative_tokens > 0 ? 1 : std::max(1, exec_.max_steps_in_flight());
}

bool Engine::launch_step() {
  const int slots = steps_in_flight_limit();
  ScheduleLimits limits;
  if (slots > 1) {  // spread the sequences over the steps in flight
    limits.steps_in_flight = true;
    const int seqs = std::min(cfg_.sched.max_num_seqs, sched_->num_running() + sched_->num_waiting());
    limits.max_seqs = std::max(1, (seqs + slots - 1) / slots);
  } else {
    propose_drafts();
  }
  SchedulerOutput out = sched_->schedule(limits);
  if (out.empty()) return false;
  for (size_t g = 0; g < out.block_copies.size(); ++g)
    if (!out.block_copies[g].empty()) exec_.copy_blocks(out.block_copies[g], int(g));
  InFlight& f = in_flight_.emplace_back();
  try {  // until submitted, a failure takes the step back out of the queue
    f.out = std::move(out);
    f.plan = plan_step(f.out, *sched_, [this](const ScheduledSeq& ss) -> EngineRequest& { return owner(ss); });
    for (const StepSeq& e : f.plan.entries)
      if (std::find(f.request_ids.begin(), f.request_ids.end(), e.r->id) == f.request_ids.end()) {
        f.request_ids.push_back(e.r->id);
        ++e.r->steps_in_flight;
      }
    const BatchPlan plan = build_batch_plan(f.out, *sched_, f.plan.logits_rows);
    f.t0 = now_seconds();
    exec_.submit(plan, step_sampling(f.plan, sample_vocab_, eos_ids_, exec_.host_free_during_forward()));
  } catch (...) {
    for (int64_t id : f.request_ids) --requests_.at(id)->steps_in_flight;
    in_flight_.pop_back();
    throw;
  }
  return true;
}

bool Engine::step() {
  // While the step runs, a request aborted from a stream callback keeps its Request object (the
  // step may still be using it); it is completed and removed when the step ends.
  // (Those of a step that threw are completed by the next one.)
  complete_aborted_in_step();
  struct InStep {
    bool& flag;
    explicit InStep(bool& f) : flag(f) { flag = true; }
    ~InStep() { flag = false; }
  };
  std::optional<InStep> in_step(std::in_place, in_step_);
  const size_t slots = size_t(steps_in_flight_limit());
  while (in_flight_.size() < slots && launch_step()) {
  }
  if (in_flight_.empty()) return false;
  struct Finished {  // the oldest step leaves the queue however finish_step ends
    Engine& e;
    ~Finished() {
      for (int64_t id : e.in_flight_.front().request_ids)
        if (auto it = e.requests_.find(id); it != e.requests_.end()) --it->second->steps_in_flight;
      e.in_flight_.pop_front();
    }
  };
  {
    Finished done{*this};
    finish_step(in_flight_.front(), exec_.collect());
  }
  in_step.reset();
  complete_aborted_in_step();
  return true;
}

void Engine::finish_step(InFlight& f, StepOutput step) {
  const std::vector<StepSeq>& entries = f.plan.entries;
  std::vector<StepDraw>& draws = f.plan.draws;
  const SchedulerOutput& out = f.out;
  const double t0 = f.t0;
  LLM_CHECK(step.draws.size() == draws.size()) << "engine: " << step.draws.size() << " draws back for " << draws.size();
  for (size_t i = 0; i < draws.size(); ++i) draws[i].outcome = std::move(step.draws[i]);
  size_t prompt_row = 0;  // step.prompt_rows, in step_sampling's order
  for (const StepSeq& e : entries)
    for (int index : e.prompt_scored) e.r->result.prompt_logprobs[size_t(index)] = std::move(step.prompt_rows.at(prompt_row++));
  stats_.device_seconds += step.device_seconds;
  stats_.weight_bytes += step.weight_bytes;
  if (out.num_tokens == int(out.seqs.size())) {
    stats_.decode_weight_bytes += step.weight_bytes;
    ++stats_.decode_steps;
  }
  // From its launch, or from the previous step's end when steps overlap (wall time counted once).
  const double end = now_seconds();
  stats_.forward_seconds += end - std::max(t0, last_step_end_);
  last_step_end_ = end;

  // A sequence whose draw, decode or stop check throws fails its own request (failed, handled
  // after the loop); every other sequence goes on. Stream callbacks run from here on: a request
  // they abort stays until the step ends, and its sequences are no longer in the scheduler.
  std::vector<int64_t> touched;
  std::vector<std::pair<int64_t, std::string>> failed;
  auto fail = [&](EngineRequest& r, const std::string& msg) {
    if (r.result.error.empty()) failed.emplace_back(r.id, msg.empty() ? "unknown error" : msg);
    r.result.error = msg.empty() ? "unknown error" : msg;
  };
  for (const StepSeq& e : entries) {
    const ScheduledSeq& ss = *e.ss;
    auto it = requests_.find(ss.owner.request_id);
    if (it == requests_.end() || !sched_->has(ss.seq_id)) continue;  // aborted while in flight
    if (!e.samples()) {
      sched_->on_step_done(ss.seq_id, StepOutcome{});
      continue;
    }
    EngineRequest& r = *it->second;
    const int child = ss.owner.index;
    const std::span<const StepDraw> mine(draws.data() + e.draw_begin, e.draw_end - e.draw_begin);
    const std::span<const StepDraw> chain = mine.first(size_t(e.chain_len));
    const bool first = mine.size() > chain.size();  // the request's first step: the siblings are forked after it
    EngineSequence& s = r.seqs[size_t(child)];
    // Tokens in order: each drawn draft is kept, the first other token (or the last row's) ends the
    // chain; so does the end of the sequence (stop token or string, max_tokens) or an error.
    int accepted = 0;
    std::vector<int32_t> appended;  // output tokens past the kept drafts: the drawn one, then those a grammar forced
    for (const StepDraw& d : chain) {
      const DrawOutcome& o = d.outcome;
      if (o.skipped || !r.result.error.empty()) break;  // (a sibling may have failed the request already)
      if (!o.error.empty()) {
        fail(r, o.error);
        break;
      }
      const bool is_draft = d.draft >= 0 && o.res.token == d.draft;  // (already in the sequence)
      try {
        if (accept_token(r, child, o.res, o.matched) && !is_draft) appended.push_back(o.res.token);  // (counts it)
      } catch (const std::exception& ex) {
        fail(r, ex.what());
        break;
      }
      if (!is_draft) break;
      ++accepted;
      if (s.done) break;
    }
    stats_.draft_tokens += e.chain_len - 1;
    stats_.accepted_draft_tokens += accepted;
    if (!s.done && r.result.error.empty() && !first) {
      try {
        jump_forward(r, child, appended);
      } catch (const std::exception& ex) {
        fail(r, ex.what());
      }
    }
    const bool failed_now = !r.result.error.empty();
    if (failed_now) s.done = true;
    // Every output token goes to the scheduler's Sequence (the engine reads its output there), also
    // when the sequence ends with this step.
    sched_->on_step_done(ss.seq_id, StepOutcome{.num_accepted = accepted, .appended = appended, .finished = s.done});
    if (failed_now) continue;  // fail_request below ends its other sequences
    if (first) {
      try {
        fork_children(r, mine.subspan(chain.size()));
      } catch (const std::exception& ex) {
        fail(r, ex.what());
      }
    }
    // Stream callbacks from here on (they may abort requests: see above).
    if (first) {
      for (int i = 0; i < int(r.seqs.size()); ++i) r.flush(i);
    } else {
      r.flush(child);
    }
    touched.push_back(r.id);
  }
  for (auto& [id, msg] : failed) {
    auto it = requests_.find(id);
    if (it != requests_.end()) fail_request(*it->second, msg);
  }
  for (int64_t id : touched) complete_if_done(id);
  stats_.record_step(sched_->kv(), int64_t(out.preempted.size()));
}

bool Engine::accept_token(EngineRequest& r, int child, const SampleResult& res, bool matched) {
  ++stats_.generated_tokens;
  stats_.grammar_unmasked_draws += matched;
  return r.accept_token(child, res, StopContext{tok_, eos_ids_, max_context_}, now_seconds(), matched);
}

void Engine::jump_forward(EngineRequest& r, int child, std::vector<int32_t>& appended) {
  EngineSequence& s = r.seqs[size_t(child)];
  // Not where a token's logprob is asked for (logprobs, best_of ranking): a forced token has none.
  if (cfg_.jump_forward_tokens <= 0 || !s.matcher || s.out.scored) return;
  for (int forced = 0; !s.done && forced < cfg_.jump_forward_tokens; ++forced) {
    SampleResult res;
    res.token = r.forced_token(child, eos_ids_, sample_vocab_);
    if (res.token < 0) return;
    s.state.append(res.token, 0.0f);  // as the draw would (its counter, penalties' counts)
    if (accept_token(r, child, res)) appended.push_back(res.token);
    ++stats_.jump_forward_tokens;
  }
}

void Engine::complete_aborted_in_step() {
  std::vector<int64_t> ids;
  ids.swap(aborted_in_step_);
  for (int64_t id : ids) complete_if_done(id);
}

// After the prompt step of a request with several sequences: children 1.. take their first token
// (drawn from the prompt's row: children[i - 1] for child i) and share the prompt's blocks through fork.
void Engine::fork_children(EngineRequest& r, std::span<const StepDraw> children) {
  r.forked = true;
  const bool parent_alive = sched_->has(r.seqs[0].seq_id);
  LLM_CHECK(children.size() + 1 == r.seqs.size()) << "engine: " << children.size() << " fork draws for "
                                                  << r.seqs.size() << " sequences";
  for (int i = 1; i < int(r.seqs.size()); ++i) {
    const StepDraw& d = children[size_t(i - 1)];
    LLM_CHECK(d.r == &r && d.child == i) << "engine: fork draws out of step";
    if (!d.outcome.error.empty()) throw Error(d.outcome.error);  // the step fails this request (see step())
    EngineSequence& s = r.seqs[size_t(i)];
    const bool kept = accept_token(r, i, d.outcome.res, d.outcome.matched);
    const int32_t first = d.outcome.res.token;
    if (s.done) {  // ended on its first token: never scheduled
      r.keep_unscheduled(i, kept ? std::optional<int32_t>(first) : std::nullopt);
      continue;
    }
    const int64_t child_id = next_seq_id_++;
    s.seq_id = child_id;
    if (parent_alive) {
      sched_->fork(r.seqs[0].seq_id, child_id, first, SeqOwner{r.id, i});
    } else {  // the parent ended on its first token: the child runs on its own (prefix cache shares blocks)
      std::vector<int32_t> toks(r.prompt().begin(), r.prompt().end());
      toks.push_back(first);
      sched_->add(child_id, std::move(toks), r.prompt_len + r.params.max_tokens, true, SeqOwner{r.id, i});
    }
    s.seq = sched_->share(child_id);
  }
}

void Engine::fail_request(EngineRequest& r, const std::string& message) {
  for (const EngineSequence& q : r.seqs)
    if (q.seq_id >= 0 && sched_->has(q.seq_id)) sched_->abort(q.seq_id);
  r.fail(message);
  complete_if_done(r.id);
}

void Engine::complete_if_done(int64_t request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  EngineRequest& r = *it->second;
  if (r.steps_in_flight > 0) {  // a launched step still points at it: completed once that one is finished
    aborted_in_step_.push_back(request_id);
    return;
  }
  if (!r.all_done()) return;
  for (const EngineSequence& q : r.seqs)
    if (q.seq_id >= 0 && sched_->has(q.seq_id)) sched_->abort(q.seq_id);
  finished_[request_id] = r.take_result(now_seconds());
  requests_.erase(it);
}

void Engine::abort(int64_t request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  EngineRequest& r = *it->second;
  for (int i = 0; i < int(r.seqs.size()); ++i) {
    if (r.seqs[size_t(i)].seq_id >= 0) sched_->abort(r.seqs[size_t(i)].seq_id);
    r.finish_sequence(i, "abort");
    r.flush(i);
  }
  if (in_step_)
    aborted_in_step_.push_back(request_id);  // step() may still use r: completed when it ends
  else
    complete_if_done(request_id);
}

void Engine::drain() {
  while (has_unfinished()) {
    if (!step()) {
      LLM_CHECK(!has_unfinished()) << "engine stalled with unfinished requests";
    }
  }
}

std::optional<RequestResult> Engine::take_result(int64_t request_id) {
  auto it = finished_.find(request_id);
  if (it == finished_.end()) return std::nullopt;
  RequestResult r = std::move(it->second);
  finished_.erase(it);
  return r;
}

int Engine::num_running_requests() const {
  int n = 0;
  for (const auto& [id, r] : requests_)
    for (const EngineSequence& q : r->seqs)
      if (q.seq_id >= 0 && sched_->has(q.seq_id) && sched_->sequence(q.seq_id).state == SeqStatus::running) {
        ++n;
        break;
      }
  return n;
}

EngineStats Engine::stats() const {
  EngineStats s = stats_;
  s.kv = sched_->kv().stats();
  return s;
}

}  // namespace llmctl
