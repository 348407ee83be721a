// Speculative drafts for a step (EngineConfig::proposer): each decoding sequence, oldest first,
// gets up to k drafts appended in the scheduler (Scheduler::append_draft), within what is left of
// the step's token budget and the KV blocks no decoding sequence needs for its own next token (a
// draft never makes the scheduler preempt a sequence), never past max_tokens, and ending before an
// id that can never be drawn.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/sched/scheduler.h"
#include "engine/spec/proposer.h"

namespace llmctl {

struct DraftLimits {
  int k = 0;                       // drafts per sequence at most
  int max_batched_tokens = 0;      // the step's token budget
  int max_seqs = 0;                // sequences a step may hold
  int sample_vocab = 0;            // ids [0, sample_vocab) may be drawn
};

// decoding: running sequences whose one pending token is their last sampled one and that have no
// drafts yet (the engine picks them: see Engine::propose_drafts).
void propose_drafts(Scheduler& sched, const Proposer& proposer, std::vector<int64_t> decoding, const DraftLimits& limits);

}  // namespace llmctl
