// build_batch_plan: turns one SchedulerOutput into the BatchPlan the model consumes (see
// engine/backend/batch_plan.h for the arrays). Sequences keep the output's order; the row of each
// sequence's last new token is a logits row when that sequence samples this step, so logits row k
// belongs to the k-th sampling sequence of out.seqs.
#pragma once
#include "engine/backend/batch_plan.h"
#include "engine/sched/scheduler.h"

namespace llmctl {

// Call right after schedule(), before any on_step_done / abort of that step (an aborted sequence is
// unknown to the scheduler and throws here; abort after building: its writes land in blocks it no
// longer holds, which no one reads before they are reallocated and written again).
BatchPlan build_batch_plan(const SchedulerOutput& out, const Scheduler& sched);

}  // namespace llmctl
