#include "engine/step_plan.h"

#include <algorithm>

#include "engine/core/error.h"
#include "engine/sample/unmasked_draw.h"
#include "engine/structured/mask_fill.h"

namespace llmctl {

StepPlan plan_step(const SchedulerOutput& out, const Scheduler& sched, const OwnerFn& owner) {
  StepPlan plan;
  plan.entries.resize(out.seqs.size());
  std::vector<int32_t>& logits_rows = plan.logits_rows;
  std::vector<StepDraw>& draws = plan.draws;
  int first_row = 0;  // plan row of the sequence's first new token
  for (size_t i = 0; i < out.seqs.size(); ++i) {
    const ScheduledSeq& ss = out.seqs[i];
    StepSeq& e = plan.entries[i];
    e.ss = &ss;
    EngineRequest& r = owner(ss);
    LLM_CHECK(ss.num_draft == 0 || r.forked || r.seqs.size() == 1)
        << "engine: sequence " << ss.seq_id << " has drafts before its request forked";
    e.r = &r;
    e.first_logit = int(logits_rows.size());
    const int child = ss.owner.index;
    if (r.params.prompt_logprobs && child == 0 && !r.forked) {
      const int last = std::min(ss.start + ss.num_new, r.prompt_len - 1);
      for (int p = ss.start; p < last; ++p)
        if (!r.result.prompt_logprobs[size_t(p) + 1]) {
          e.prompt_scored.push_back(p + 1);
          logits_rows.push_back(first_row + p - ss.start);
        }
    }
    if (ss.samples) {
      const int d = ss.num_draft;  // the sequence's last d tokens, verified by rows 0..d-1 of the chain
      const std::vector<int32_t>& tokens = sched.sequence(ss.seq_id).tokens;
      const int row = int(logits_rows.size());
      e.draw_begin = draws.size();
      e.chain_len = d + 1;
      for (int j = 0; j <= d; ++j) {
        logits_rows.push_back(first_row + ss.num_new - 1 - d + j);
        StepDraw dr;
        dr.r = &r, dr.child = child, dr.row = row + j;
        if (j < d) dr.draft = tokens[tokens.size() - size_t(d - j)];
        dr.chained = j > 0;
        draws.push_back(dr);
      }
      if (!r.forked && child == 0 && r.seqs.size() > 1)
        for (int c = 1; c < int(r.seqs.size()); ++c) {
          StepDraw sibling;
          sibling.r = &r, sibling.child = c, sibling.row = row;
          draws.push_back(sibling);
        }
      e.draw_end = draws.size();
    }
    first_row += ss.num_new;
  }
  return plan;
}

StepSampling step_sampling(const StepPlan& plan, int vocab, std::span<const int> eos_ids, bool masks_async) {
  StepSampling s;
  s.vocab = vocab;
  s.eos_ids = eos_ids;
  s.draws.reserve(plan.draws.size());
  std::vector<MaskJob> masks;
  for (const StepDraw& d : plan.draws) {
    DrawSpec spec;
    spec.params = &d.r->params, spec.state = &d.r->seqs[size_t(d.child)].state;
    spec.row = d.row, spec.draft = d.draft, spec.chained = d.chained;
    EngineSequence& seq = d.r->seqs[size_t(d.child)];
    if (seq.matcher) {
      LLM_CHECK(d.draft < 0 && !d.chained) << "engine: drafts for a constrained sequence";
      if (seq.mask_current) {
        spec.allowed = seq.mask;
      } else if (can_draw_unmasked(d.r->params)) {
        spec.matcher = seq.matcher.get(), spec.mask = seq.mask;  // filled by the sampler if needed
      } else {
        masks.push_back(MaskJob{seq.matcher.get(), seq.mask});
        spec.allowed = seq.mask;
      }
      seq.mask_current = false;  // the draw advances the matcher
    }
    s.draws.push_back(spec);
  }
  if (masks_async && !masks.empty()) {
    s.masks_ready = fill_masks_async(std::move(masks));  // before the engine submits the forward: beside it
  } else {
    fill_masks(masks);
  }
  for (const StepSeq& e : plan.entries)
    for (size_t k = 0; k < e.prompt_scored.size(); ++k) {
      const size_t index = size_t(e.prompt_scored[k]);
      s.prompt_rows.push_back(PromptRowSpec{e.first_logit + int(k), e.r->prompt()[index], *e.r->params.prompt_logprobs});
    }
  return s;
}

}  // namespace llmctl
