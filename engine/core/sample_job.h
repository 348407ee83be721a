// SampleJob: one token drawn on a backend from a row of a step's logits (engine/sample/device_sampling.h
// builds the jobs; Backend::sample runs them), following engine/sample/logits_processors.h. A plain
// struct that the sampler and the backends both include.
#pragma once
#include <cstdint>
#include <vector>

namespace llmctl {

struct LogitEdit {
  enum : uint32_t { kBias = 1, kSuppress = 2, kSubtract = 4, kRepeat = 8 };
  int32_t id = 0;
  uint32_t flags = 0;
  float bias = 0, sub = 0;  // += bias; -= sub (presence + frequency * count)
};
struct SampleJob {
  int row = 0;
  int vocab = 0;  // ids [0, vocab) may be drawn (0: the whole row); ids past it never are
  int top_k = 0;
  float temperature = 0;  // 0: greedy
  float top_p = 1, min_p = 0, repetition_penalty = 1;
  double u = 0;                // the draw, counter_uniform(seed, step)
  std::vector<LogitEdit> edits;  // unique ids
};

}  // namespace llmctl
