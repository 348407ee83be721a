// build_batch_plan: turns one SchedulerOutput into the BatchPlan the model consumes (see
// engine/core/batch_plan.h for the arrays). Sequences keep the output's order: the new tokens of
// out.seqs[i] are rows [query_start[i], query_start[i + 1]) of the plan.
//
// Logits rows are decided once, by the caller, before the plan is built: `logits_rows` (ascending
// plan rows) goes into the plan as it is. sampling_rows() gives the rows a step needs to sample:
// per sequence with samples == true, its last num_draft + 1 rows (one row for a plain decode).
#pragma once
#include <vector>

#include "engine/core/batch_plan.h"
#include "engine/sched/scheduler.h"

namespace llmctl {

// Call right after schedule(), before any on_step_done / abort of that step (an aborted sequence is
// unknown to the scheduler and throws here; abort after building: its writes land in blocks it no
// longer holds, which no one reads before they are reallocated and written again).
BatchPlan build_batch_plan(const SchedulerOutput& out, const Scheduler& sched, std::vector<int32_t> logits_rows);
// The same with sampling_rows(out) as its logits rows.
BatchPlan build_batch_plan(const SchedulerOutput& out, const Scheduler& sched);

// Plan rows of the sampling sequences' last num_draft + 1 new tokens, in out.seqs order.
std::vector<int32_t> sampling_rows(const SchedulerOutput& out);

}  // namespace llmctl
