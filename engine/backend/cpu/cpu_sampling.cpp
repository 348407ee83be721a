#include "engine/backend/cpu/cpu_sampling.h"

#include <algorithm>
#include <cmath>
#include <exception>

#include "engine/backend/cpu/sampling_stages.h"
#include "engine/core/error.h"

namespace llmctl {

namespace {

// Stages 1-4 as the job lists them, per id in the host sampler's stage order.
void apply_edits(float* row, int vocab, const SampleJob& j) {
  for (const LogitEdit& e : j.edits) {
    if (e.id < 0 || e.id >= vocab) continue;
    float& x = row[e.id];
    if (e.flags & LogitEdit::kBias) x += e.bias;
    if (e.flags & LogitEdit::kSuppress) x = -INFINITY;
    if (e.flags & LogitEdit::kSubtract) x -= e.sub;
    if (e.flags & LogitEdit::kRepeat) x = x > 0 ? x / j.repetition_penalty : x * j.repetition_penalty;
  }
}

int32_t draw(const float* row, int width, const SampleJob& j) {
  const int vocab = j.vocab > 0 ? std::min(j.vocab, width) : width;
  thread_local std::vector<float> work;
  thread_local Candidates c;
  if (j.temperature == 0 && j.edits.empty()) {  // the row as it is (no copy)
    const int token = argmax(row, vocab);
    return row[token] == -INFINITY ? -1 : token;
  }
  work.assign(row, row + vocab);
  apply_edits(work.data(), vocab, j);
  if (j.temperature == 0) {
    const int token = argmax(work.data(), vocab);
    return work[size_t(token)] == -INFINITY ? -1 : token;
  }
  try {
    temperature_top_k(work.data(), vocab, j.temperature, j.top_k, c);
    apply_top_p(c, j.top_p);
    apply_min_p(c, j.min_p);
    return draw_candidate(c, j.u);
  } catch (const std::exception&) {
    return -1;  // every candidate suppressed
  }
}

}  // namespace

std::vector<int32_t> cpu_sample(const Tensor& logits, const std::vector<SampleJob>& jobs) {
  LLM_CHECK(logits.device == Device::CPU && logits.dtype == DType::F32 && logits.shape.size() == 2)
      << "cpu sample: logits must be host f32 [rows, vocab]";
  const int rows = int(logits.dim(0)), width = int(logits.dim(1));
  std::vector<int32_t> out;
  out.reserve(jobs.size());
  for (const SampleJob& j : jobs) {
    LLM_CHECK(j.row >= 0 && j.row < rows) << "cpu sample: row " << j.row << " of " << rows;
    out.push_back(draw(logits.ptr<float>() + int64_t(j.row) * width, width, j));
  }
  return out;
}

}  // namespace llmctl
