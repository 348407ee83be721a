#include "engine/sample/logits_processors.h"

#include <limits>

namespace llmctl {

void apply_logit_bias(float* logits, int vocab, const SamplingParams& p) {
  // Ids at or past `vocab` are the model's padding rows the tokenizer lacks (validated against the
  // model's vocabulary): they are never candidates, so their bias has nothing to act on.
  for (const auto& [id, bias] : p.logit_bias)
    if (id >= 0 && id < vocab) logits[id] += bias;
}

void apply_min_tokens(float* logits, int vocab, const SamplingParams& p, const SequenceState& s) {
  if (s.num_generated() >= p.min_tokens) return;
  for (int id : s.stop_ids)
    if (id >= 0 && id < vocab) logits[id] = -std::numeric_limits<float>::infinity();
}

void apply_presence_frequency(float* logits, int vocab, const SamplingParams& p, const SequenceState& s) {
  if (p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f) return;
  for (const auto& [id, count] : s.output_counts) {
    if (id < 0 || id >= vocab || count <= 0) continue;
    logits[id] -= p.presence_penalty + p.frequency_penalty * float(count);
  }
}

void apply_repetition_penalty(float* logits, int vocab, const SamplingParams& p, const SequenceState& s) {
  if (p.repetition_penalty == 1.0f) return;
  auto penalize = [&](int id) {
    if (id < 0 || id >= vocab) return;
    float& l = logits[id];
    l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
  };
  for (int id : s.prompt_ids) penalize(id);
  for (const auto& [id, count] : s.output_counts)
    if (!s.in_prompt(id)) penalize(id);  // once per id, whatever the count
}

bool edits_logits(const SamplingParams& p, const SequenceState& s) {
  return !p.logit_bias.empty() || (s.num_generated() < p.min_tokens && !s.stop_ids.empty()) ||
         p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f || p.repetition_penalty != 1.0f;
}

void process_logits(float* logits, int vocab, const SamplingParams& p, const SequenceState& s) {
  apply_logit_bias(logits, vocab, p);
  apply_min_tokens(logits, vocab, p, s);
  apply_presence_frequency(logits, vocab, p, s);
  apply_repetition_penalty(logits, vocab, p, s);
}

void truncate_candidates(const float* logits, int vocab, const SamplingParams& p, Candidates& c) {
  temperature_top_k(logits, vocab, p.temperature, p.top_k, c);
  apply_top_p(c, p.top_p);
  apply_min_p(c, p.min_p);
}

}  // namespace llmctl
