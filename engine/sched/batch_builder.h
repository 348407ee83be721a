// build_batch_plan: turns one SchedulerOutput into the BatchPlan the model consumes (see
// engine/backend/batch_plan.h for the arrays). Sequences keep the output's order; the row of each
// sequence's last new token is a logits row when that sequence samples this step, so logits row k
// belongs to the k-th sampling sequence of out.seqs.
#pragma once
#include "engine/backend/batch_plan.h"
#include "engine/sched/scheduler.h"

namespace llmctl {

// Call right after schedule(), before any on_step_done / abort of that step.
BatchPlan build_batch_plan(const SchedulerOutput& out, const Scheduler& sched);

}  // namespace llmctl
