// Token sampling on the device, so logits never leave it. One thread block per job runs the
// pipeline of engine/sample/logits_processors.h on one logits row:
//   edits (logit_bias, min_tokens suppression, presence/frequency, repetition: sparse, per id)
//   -> greedy arg max (lowest id on ties), or temperature -> top-k -> top-p -> min-p
//   -> inverse-CDF draw of u in ascending id order.
// The arithmetic is the host sampler's: the same exponential polynomial with rounded (never
// fused) float operations, the same float renormalizations; sums are in double (fixed order, so a
// job's token does not depend on the others) and top-p masses in 2^-52 fixed point. A draw can
// differ from the host's only where u or top_p lies within double rounding of a boundary.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace llmctl::cuda {

constexpr uint32_t kEditBias = 1, kEditSuppress = 2, kEditSubtract = 4, kEditRepeat = 8;

// One token id's edits, applied in the host's order: += bias, -> -inf, -= sub, repetition.
struct LogitEditDev {
  int32_t id;
  uint32_t flags;
  float bias, sub;
};

struct SampleJobDev {
  int32_t row;          // logits row
  int32_t vocab;        // ids [0, vocab) are candidates (<= SampleParams::vocab, the row width)
  int32_t top_k;        // <= 0 or >= vocab: off
  float temperature;    // 0: greedy
  float top_p, min_p;   // 1 / 0: off
  float repetition;     // penalty for kEditRepeat ids
  double u;             // the draw in [0, 1)
  int32_t edit_begin, edit_end;  // range in edits
};

struct SampleParams {
  const float* logits = nullptr;  // [rows, vocab] f32
  int64_t vocab = 0;              // the row width; a job may draw from fewer ids (SampleJobDev::vocab)
  const SampleJobDev* jobs = nullptr;
  int num_jobs = 0;
  const LogitEditDev* edits = nullptr;
  float* scratch = nullptr;  // [num_jobs, vocab] f32
  int32_t* tokens = nullptr; // [num_jobs]; -1 when every token is suppressed
};

void launch_sample(const SampleParams& p, cudaStream_t stream);

}  // namespace llmctl::cuda
