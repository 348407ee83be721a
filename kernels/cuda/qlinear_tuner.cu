#include "kernels/cuda/qlinear_tuner.h"

#include <algorithm>
#include <cfloat>

#include "kernels/cuda/cuda_check.h"

namespace llmctl::cuda {
namespace {

int64_t bucket(int64_t t) {
  int64_t b = 1;
  while (b < t) b <<= 1;
  return b;
}

QLinearTuner::Kernel fixed_rule(const QLinearParams& p) {
  return qlinear_mma_fits(p) && p.T > kQLinearSmallT ? QLinearTuner::Kernel::TensorCores
                                                     : QLinearTuner::Kernel::CudaCores;
}

void launch(QLinearTuner::Kernel k, const QLinearParams& p, cudaStream_t stream) {
  if (k == QLinearTuner::Kernel::TensorCores)
    qlinear_mma(p, stream);
  else
    qlinear(p, stream);
}

// Best of 3 timed launches after a warm-up, in ms.
float time_ms(QLinearTuner::Kernel k, const QLinearParams& p, cudaStream_t stream, cudaEvent_t a, cudaEvent_t b) {
  launch(k, p, stream);
  float best = FLT_MAX;
  for (int r = 0; r < 3; ++r) {
    CUDA_CHECK(cudaEventRecord(a, stream));
    launch(k, p, stream);
    CUDA_CHECK(cudaEventRecord(b, stream));
    CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    best = std::min(best, ms);
  }
  return best;
}

}  // namespace

QLinearTuner::Key QLinearTuner::key_of(const QLinearParams& p) {
  return {p.bits, p.group, int(p.x_dtype), int(p.out_dtype), int(p.scale_dtype), p.N, p.K, bucket(p.T)};
}

QLinearTuner::Kernel QLinearTuner::choice(const QLinearParams& p) const {
  const auto it = chosen_.find(key_of(p));
  return it != chosen_.end() && qlinear_mma_fits(p) && p.T > kQLinearSmallT ? it->second : fixed_rule(p);
}

void QLinearTuner::run(const QLinearParams& p, cudaStream_t stream) {
  if (!qlinear_mma_fits(p) || p.T <= kQLinearSmallT) return launch(fixed_rule(p), p, stream);
  const Key key = key_of(p);
  if (const auto it = chosen_.find(key); it != chosen_.end()) return launch(it->second, p, stream);
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
  if (capturing != cudaStreamCaptureStatusNone) return launch(fixed_rule(p), p, stream);
  struct Events {  // destroyed on every way out
    cudaEvent_t a = nullptr, b = nullptr;
    ~Events() {
      if (a) cudaEventDestroy(a);
      if (b) cudaEventDestroy(b);
    }
  } ev;
  CUDA_CHECK(cudaEventCreate(&ev.a));
  CUDA_CHECK(cudaEventCreate(&ev.b));
  const float cores = time_ms(Kernel::CudaCores, p, stream, ev.a, ev.b);
  const float tensor = time_ms(Kernel::TensorCores, p, stream, ev.a, ev.b);
  const Kernel k = tensor < cores ? Kernel::TensorCores : Kernel::CudaCores;
  chosen_[key] = k;
  launch(k, p, stream);  // the call's result from the kernel kept
}

}  // namespace llmctl::cuda
