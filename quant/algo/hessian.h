// GPTQ's Hessian of one linear layer's input: H = 2/nsamples * sum over calibration rows of x x^T.
//
// Accumulated as llm-compressor does (accumulate_hessian: a running sum of 2 x x^T, divided by the
// sample count when GPTQ runs), but in fp64 where it uses fp32. Rows are summed in tiles of 64
// consecutive rows of the whole calibration stream (buffered across add() calls), so the result
// does not depend on how calibration is split into add() calls, nor on the thread count. The sample
// count is llm-compressor's: it counts sequences (the batch dimension of a [batch, seq, K] input),
// not rows; add() takes it as an argument (default: each row is a sample). Its scale only changes
// GPTQ's reported loss, not the quantized weight.
//
// State: empty (samples 0, h() all zero) -> add()* -> h(). add() after h() is allowed (h() is
// recomputed). Not safe to call concurrently.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/core/thread_pool.h"

namespace llmctl::quant {

class HessianAccumulator {
 public:
  // threads: 0 = the process-wide pool.
  explicit HessianAccumulator(int64_t k, int threads = 0);
  ~HessianAccumulator();

  // x [rows, K] row-major f32; samples: how many calibration samples these rows are (llm-compressor:
  // 1 per sequence); -1: rows.
  void add(const float* x, int64_t rows, int64_t samples = -1);

  // [K, K] row-major, symmetric: 2/samples * sum x x^T (all zero before the first add).
  const std::vector<double>& h() const;
  int64_t samples() const { return samples_; }
  int64_t k() const { return k_; }

 private:
  // target (upper triangle) += sum over the nr rows of tile [nr, K] of x x^T.
  void accumulate(std::vector<double>& target, const double* tile, int64_t nr) const;

  int64_t k_;
  int64_t samples_ = 0;
  std::vector<double> sum_;      // upper triangle of sum x x^T over the full tiles so far
  std::vector<double> pending_;  // [64, K] rows not yet in sum_ (a partial tile)
  int64_t pending_rows_ = 0;
  mutable std::vector<double> h_;
  mutable bool h_valid_ = false;
  std::unique_ptr<ThreadPool> own_pool_;
  ThreadPool* pool_;
};

}  // namespace llmctl::quant
