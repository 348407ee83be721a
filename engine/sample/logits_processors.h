// Logits processing, applied in this fixed order (vLLM's):
//   1. logit_bias            logits[id] += bias
//   2. min_tokens            before min_tokens tokens are generated, stop ids (EOS unless ignore_eos,
//                            and stop_token_ids) get -inf
//   3. presence / frequency  logits[id] -= presence * (count > 0) + frequency * count, over GENERATED
//                            tokens only (OpenAI)
//   4. repetition            every id in prompt + generated: l > 0 ? l / r : l * r (HF / CTRL)
//   5. temperature           p = softmax(l / T); T = 0 means greedy: arg max of 1-4, steps 6-8 skipped
//   6. top-k                 keep the k most probable (ties by lower id)
//   7. top-p                 keep the smallest most-probable prefix whose mass reaches top_p
//   8. min-p                 keep tokens with p >= min_p * max p
// then a draw. Stages 1-4 edit a logits row in place; 5-8 work on a Candidates set.
#pragma once
#include <vector>

#include "engine/backend/cpu/sampling_stages.h"
#include "engine/sample/sampling_params.h"
#include "engine/sample/sequence_state.h"

namespace llmctl {

// vocab is the number of ids that may be drawn (a row's first `vocab` entries): ids past it, e.g.
// a model's padded embedding rows the tokenizer lacks, are never candidates, whatever their edits.
void apply_logit_bias(float* logits, int vocab, const SamplingParams& p);
void apply_min_tokens(float* logits, int vocab, const SamplingParams& p, const SequenceState& s);
void apply_presence_frequency(float* logits, int vocab, const SamplingParams& p, const SequenceState& s);
void apply_repetition_penalty(float* logits, int vocab, const SamplingParams& p, const SequenceState& s);
// Whether stages 1-4 can change any entry of a row for this request and state (false: the row may be
// read as it is, without a copy to edit).
bool edits_logits(const SamplingParams& p, const SequenceState& s);
// Stages 1-4 in order.
void process_logits(float* logits, int vocab, const SamplingParams& p, const SequenceState& s);

// Stages 5-8 in order, into c.
void truncate_candidates(const float* logits, int vocab, const SamplingParams& p, Candidates& c);

}  // namespace llmctl
