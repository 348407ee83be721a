#include "engine/sample/device_sampling.h"

#include <map>

#include "engine/sample/sampler.h"

namespace llmctl {

bool device_samplable(const SamplingParams& params) {
  return !params.logprobs && params.num_generated_sequences() <= params.n;
}

SampleJob make_sample_job(const SamplingParams& p, const SequenceState& s, uint64_t step, int row, int vocab) {
  SampleJob job;
  job.row = row;
  job.vocab = vocab;  // ids past it (padding rows the tokenizer lacks) are never drawn
  job.temperature = p.greedy() ? 0.0f : p.temperature;
  job.top_k = p.top_k;
  job.top_p = p.top_p;
  job.min_p = p.min_p;
  job.repetition_penalty = p.repetition_penalty;
  job.u = p.greedy() ? 0.0 : counter_uniform(s.seed, step);

  std::map<int, LogitEdit> edits;  // by id: each id's edits apply in the host's order
  auto edit = [&](int id) -> LogitEdit& {
    LogitEdit& e = edits[id];
    e.id = id;
    return e;
  };
  for (const auto& [id, bias] : p.logit_bias) {
    LogitEdit& e = edit(id);
    e.flags |= LogitEdit::kBias;
    e.bias = bias;
  }
  if (s.num_generated() < p.min_tokens)
    for (int id : s.stop_ids) edit(id).flags |= LogitEdit::kSuppress;
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f)
    for (const auto& [id, count] : s.output_counts) {
      if (count <= 0) continue;
      LogitEdit& e = edit(id);
      e.flags |= LogitEdit::kSubtract;
      e.sub = p.presence_penalty + p.frequency_penalty * float(count);  // as apply_presence_frequency
    }
  if (p.repetition_penalty != 1.0f) {
    for (int id : s.prompt_ids) edit(id).flags |= LogitEdit::kRepeat;
    for (const auto& [id, count] : s.output_counts) edit(id).flags |= LogitEdit::kRepeat;
  }
  job.edits.reserve(edits.size());
  for (auto& [id, e] : edits)
    if (id >= 0 && id < vocab) job.edits.push_back(e);
  return job;
}

}  // namespace llmctl
