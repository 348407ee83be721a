// What a step asks of sampling and what it gets back: the plain structs that cross the Executor
// (engine/executor/executor.h). The engine fills a StepSampling when it plans a step; below the
// executor, sample_step (step_sampler.h) turns the step's logits rows into a StepOutput, so the
// engine never sees a logits tensor.
#pragma once
#include <cstdint>
#include <future>
#include <span>
#include <string>
#include <vector>

#include "engine/sample/sampler.h"
#include "engine/sample/sampling_params.h"
#include "engine/sample/sequence_state.h"
#include "engine/structured/constraint.h"

namespace llmctl {

// One logits row to draw a token from, for one sequence. The pointers stay valid until the step's
// output is returned (the engine keeps a step's requests alive while it is in flight).
struct DrawSpec {
  const SamplingParams* params = nullptr;
  SequenceState* state = nullptr;  // the drawn token (and its logprob) is appended to it
  int row = 0;                     // in the step's logits rows
  // Speculative chains: row j + 1 of a sequence is drawn only when row j drew its draft (and that
  // draft is not a stop token). draft -1: the chain's last row.
  int32_t draft = -1;
  bool chained = false;  // a later row of a chain
  // The logits-processor hook: a bitmask over the vocabulary (bit id % 32 of word id / 32 set = id
  // allowed), applied to the raw row before anything else; empty = every id allowed. Words past
  // the mask's end allow nothing.
  std::span<const uint32_t> allowed;
  // A draw under a grammar whose mask is not filled yet (can_draw_unmasked, unmasked_draw.h): the
  // grammar is asked about single tokens first and the token it accepts stays accepted
  // (DrawOutcome::matched); where that finds none, `mask` is filled and the draw made under it. The
  // same distribution as a draw under the mask, which, a pass over the whole vocabulary, is then
  // only computed where the model's own choices break the grammar.
  ConstraintMatcher* matcher = nullptr;
  std::span<uint32_t> mask;
};

// A prompt position to score: logits row `row` against the prompt token that came next.
struct PromptRowSpec {
  int row = 0;
  int target = 0;
  int top_n = 0;
};

struct StepSampling {
  std::vector<DrawSpec> draws;          // chains in order, row ascending within a chain
  std::vector<PromptRowSpec> prompt_rows;
  int vocab = 0;                        // ids [0, vocab) may be drawn (the row may be wider)
  std::span<const int> eos_ids;         // ends a chain like a mismatch (is_stop_token)
  // Ready once the draws' `allowed` masks are filled (valid only when some draw has one): they
  // are filled while the forward runs (engine/structured/mask_fill.h); the sampler waits for it.
  std::shared_future<void> masks_ready;
  bool empty() const { return draws.empty() && prompt_rows.empty(); }
};

struct DrawOutcome {
  SampleResult res;     // res.token: the drawn token (logprob and top only where params ask)
  std::string error;    // the draw failed (e.g. every token suppressed): its request fails alone
  bool skipped = false; // not drawn: an earlier row of its chain drew something else, stopped or failed
  bool matched = false; // DrawSpec::matcher has accepted res.token already (the engine does not again)
};

struct StepOutput {
  std::vector<DrawOutcome> draws;          // one per StepSampling::draws entry
  std::vector<TokenLogprobs> prompt_rows;  // one per StepSampling::prompt_rows entry
  double device_seconds = 0;               // device time of the step where measured (0 otherwise)
  uint64_t weight_bytes = 0;               // the linears' weight bytes the step read (rank 0's share)
};

// Whether the bitmask allows id (an empty mask allows every id).
inline bool mask_allows(std::span<const uint32_t> allowed, int id) {
  if (allowed.empty()) return true;
  const size_t word = size_t(id) / 32;
  return word < allowed.size() && (allowed[word] >> (uint32_t(id) % 32) & 1u) != 0;
}

}  // namespace llmctl
