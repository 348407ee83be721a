// Per-shape GEMM algorithm selection (FasterTransformer's GEMM autotuning): the first call of a
// shape (dtypes, N, K, and T rounded up to a power of two) asks cuBLASLt's heuristic for up to 8
// algorithms and, for decode-sized T, adds llmctl's own GEMV variants (gemv.cu); it times each on the
// call's own operands (best of 3 after a warm-up), keeps the fastest and appends it to a cache file,
// so later processes skip the measurement. A cached
// algorithm is checked against the shape before use (cublasLtMatmulAlgoCheck); one that no longer
// fits is measured again. While a stream is being captured into a graph nothing can be timed: an
// unknown shape then runs the heuristic's first choice (the engine runs every graph shape eagerly
// first, so this does not happen there).
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <map>
#include <string>
#include <tuple>

#include "kernels/cuda/gemm.cuh"

namespace llmctl::cuda {

class GemmTuner {
 public:
  // cache_path: the file of measured choices ("" = keep them in memory only).
  GemmTuner(void* workspace, size_t workspace_bytes, std::string cache_path);
  ~GemmTuner();
  GemmTuner(const GemmTuner&) = delete;
  GemmTuner& operator=(const GemmTuner&) = delete;

  void gemm(const GemmParams& p, cudaStream_t stream);

  int measured() const { return measured_; }      // shapes timed by this process
  int from_cache() const { return from_cache_; }  // shapes whose choice came from the file
  const std::string& cache_path() const { return path_; }

 private:
  using Key = std::tuple<int, int, int64_t, int64_t, int64_t>;  // in dtype, out dtype, N, K, T bucket
  struct Entry {
    cublasLtMatmulAlgo_t algo{};
    int gemv_rows = 0;  // > 0: the GEMV variant with this many rows per block instead of cuBLASLt
    bool checked = false;
  };
  struct Descs;
  void load();
  void save_entry(const Key& key, const Entry& e) const;
  Entry tune(const GemmParams& p, Descs& d, cudaStream_t stream);

  cublasLtHandle_t lt_ = nullptr;
  void* ws_ = nullptr;
  size_t ws_bytes_ = 0;
  std::string path_;
  std::map<Key, Entry> algos_;
  int measured_ = 0, from_cache_ = 0;
};

}  // namespace llmctl::cuda
