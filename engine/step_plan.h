// A step as the engine plans it from the scheduler's output, before the forward: each scheduled
// sequence's logits rows (prompt rows still missing a prompt logprob, then its sampling rows) and
// its draws, and the StepSampling they become (engine/sample/step_sampling.h).
//
// Logits rows, per sequence: the prompt rows (row of position p scores prompt token p + 1), then
// one row per draft, then the last. A request's first step with several sequences draws all of its
// children from the prompt's row (they are forked after the parent's token; no drafts then).
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/engine_request.h"
#include "engine/sample/step_sampling.h"
#include "engine/sched/scheduler.h"

namespace llmctl {

// A row to draw for sequence `child` of r (DrawSpec's row, draft and chained), and what came of it.
struct StepDraw {
  EngineRequest* r = nullptr;
  int child = 0;
  int row = 0;
  int32_t draft = -1;     // the draft this row's token is compared with; -1: the sequence's last row
  bool chained = false;   // a later row of the same sequence: drawn only if the previous row drew its draft
  DrawOutcome outcome;    // from the step's StepOutput
};

// One scheduled sequence of a step, decided once before the forward.
struct StepSeq {
  const ScheduledSeq* ss = nullptr;
  EngineRequest* r = nullptr;        // valid for the whole step (an abort during it removes r when it ends)
  std::vector<int> prompt_scored;    // prompt positions scored by its prompt rows (logits first_logit...)
  int first_logit = 0;               // index in the step's logits of its first row
  // Its draws: its own chain (one per draft, then the row after them: chain_len = num_draft + 1),
  // then (a request's first step) its siblings'.
  size_t draw_begin = 0, draw_end = 0;
  int chain_len = 0;
  bool samples() const { return draw_end > draw_begin; }
};

struct StepPlan {
  std::vector<StepSeq> entries;  // point into the SchedulerOutput planned from (keep it alive)
  std::vector<StepDraw> draws;
  std::vector<int32_t> logits_rows;  // BatchPlan::logits_rows
};

// owner: the request of a scheduled sequence (throws when it has none).
using OwnerFn = std::function<EngineRequest&(const ScheduledSeq&)>;
StepPlan plan_step(const SchedulerOutput& out, const Scheduler& sched, const OwnerFn& owner);

// What the plan's draws and prompt rows ask of sampling (pointing into the plan's requests).
// Constrained sequences' token masks are filled here, or with masks_async on a thread of their own
// that runs while the engine submits the forward (StepSampling::masks_ready); except for draws that
// can ask the grammar about single tokens first (can_draw_unmasked: greedy, plain temperature,
// top-k): the sampler fills theirs only where that finds no token (DrawSpec::matcher).
StepSampling step_sampling(const StepPlan& plan, int vocab, std::span<const int> eos_ids, bool masks_async = false);

}  // namespace llmctl
