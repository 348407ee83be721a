// Per-shape choice between the two quantized-linear kernels (qlinear.cuh) past decode sizes, beside
// the GEMM tuner's cuBLASLt choice for dense weights. Up to kQLinearSmallT tokens the CUDA-core
// kernel always runs: decode steps of 1 to 8 sequences then give each row the same bits (the two
// kernels round differently). Past that, the first call of a key (bits, group, activation, output
// and scale dtypes, N, K, and T rounded up to a power of two) times both on the call's own operands
// (best of 3 after a warm-up) and keeps the faster for the process; later calls of the key run it.
// Where the tensor-core kernel does not fit, or the stream is being captured into a graph (nothing
// can be timed there; the engine runs every graph shape eagerly first), the fixed rule runs:
// CUDA cores up to kQLinearSmallT tokens, tensor cores past it.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "kernels/cuda/qlinear.cuh"

namespace llmctl::cuda {

class QLinearTuner {
 public:
  enum class Kernel { CudaCores, TensorCores };
  void run(const QLinearParams& p, cudaStream_t stream);
  // The kernel a measured key chose (for reports and tests); the fixed rule's otherwise.
  Kernel choice(const QLinearParams& p) const;
  int measured() const { return int(chosen_.size()); }

 private:
  using Key = std::tuple<int, int, int, int, int, int64_t, int64_t, int64_t>;
  static Key key_of(const QLinearParams& p);
  std::map<Key, Kernel> chosen_;
};

}  // namespace llmctl::cuda
