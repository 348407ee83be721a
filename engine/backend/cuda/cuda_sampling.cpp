// CudaBackend::sample: packs the jobs and their logit edits into one pinned buffer, copies it over,
// runs kernels/cuda/sampling.cu and copies back one token per job (the only bytes that cross).
#include <cstring>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/core/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/sampling.cuh"

namespace llmctl {

std::vector<int32_t> CudaBackend::sample(const Tensor& logits, const std::vector<SampleJob>& jobs) {
  check_device(logits, "sample logits");
  LLM_CHECK(logits.dtype == DType::F32 && logits.rank() == 2) << "sample: logits must be f32 [R, V], got "
                                                              << dtype_name(logits.dtype) << logits.shape_str();
  const int64_t R = logits.dim(0), V = logits.dim(1);
  const int J = int(jobs.size());
  if (J == 0) return {};
  size_t num_edits = 0;
  for (const SampleJob& j : jobs) {
    LLM_CHECK(j.row >= 0 && j.row < R) << "sample: row " << j.row << " of " << R;
    LLM_CHECK(j.vocab >= 0 && j.vocab <= V) << "sample: vocab " << j.vocab << " of a row of " << V;
    num_edits += j.edits.size();
  }
  const size_t jobs_bytes = size_t(J) * sizeof(cuda::SampleJobDev);
  const size_t edits_off = (jobs_bytes + 255) / 256 * 256;
  const size_t tokens_off = (edits_off + num_edits * sizeof(cuda::LogitEditDev) + 255) / 256 * 256;
  const size_t bytes = tokens_off + size_t(J) * sizeof(int32_t);

  // Sampling runs outside graphs, but grow() would drop them: keep these buffers separate.
  auto ensure = [&](void*& buf, size_t& cap, size_t want, bool pinned) {
    if (want <= cap) return;
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (buf) CUDA_CHECK(pinned ? cudaFreeHost(buf) : cudaFree(buf));
    buf = nullptr;
    cap = 0;
    const size_t c = want + want / 2;
    CUDA_CHECK(pinned ? cudaHostAlloc(&buf, c, cudaHostAllocDefault) : cudaMalloc(&buf, c));
    cap = c;
  };
  ensure(sample_pinned_, sample_pinned_bytes_, bytes, true);
  ensure(sample_dev_, sample_dev_bytes_, bytes, false);
  ensure(sample_scratch_, sample_scratch_bytes_, size_t(J) * size_t(V) * sizeof(float), false);

  CUDA_CHECK(cudaStreamSynchronize(stream_));  // the staging buffer is reused below
  auto* host = static_cast<char*>(sample_pinned_);
  auto* dj = reinterpret_cast<cuda::SampleJobDev*>(host);
  auto* de = reinterpret_cast<cuda::LogitEditDev*>(host + edits_off);
  int32_t e = 0;
  for (int i = 0; i < J; ++i) {
    const SampleJob& j = jobs[size_t(i)];
    dj[i] = cuda::SampleJobDev{j.row, j.vocab > 0 ? j.vocab : int32_t(V), j.top_k, j.temperature, j.top_p, j.min_p,
                               j.repetition_penalty, j.u, e, e + int32_t(j.edits.size())};
    for (const LogitEdit& ed : j.edits) de[e++] = cuda::LogitEditDev{ed.id, ed.flags, ed.bias, ed.sub};
  }
  static_assert(uint32_t(LogitEdit::kBias) == cuda::kEditBias && uint32_t(LogitEdit::kSuppress) == cuda::kEditSuppress &&
                uint32_t(LogitEdit::kSubtract) == cuda::kEditSubtract && uint32_t(LogitEdit::kRepeat) == cuda::kEditRepeat);
  auto* dev = static_cast<char*>(sample_dev_);
  CUDA_CHECK(cudaMemcpyAsync(dev, host, tokens_off, cudaMemcpyHostToDevice, stream_));
  cuda::SampleParams p;
  p.logits = logits.ptr<float>();
  p.vocab = V;
  p.jobs = reinterpret_cast<const cuda::SampleJobDev*>(dev);
  p.num_jobs = J;
  p.edits = reinterpret_cast<const cuda::LogitEditDev*>(dev + edits_off);
  p.scratch = static_cast<float*>(sample_scratch_);
  p.tokens = reinterpret_cast<int32_t*>(dev + tokens_off);
  cuda::launch_sample(p, stream_);
  std::vector<int32_t> tokens(static_cast<size_t>(J));
  CUDA_CHECK(cudaMemcpyAsync(tokens.data(), p.tokens, size_t(J) * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
  synchronize();
  return tokens;  // -1 where every token is suppressed: the engine fails that sequence alone
}

}  // namespace llmctl
