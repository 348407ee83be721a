#include "quant/algo/hessian.h"

#include <algorithm>

#include "engine/core/error.h"
#include "quant/algo/linalg.h"

namespace llmctl::quant {

HessianAccumulator::HessianAccumulator(int64_t k, int threads) : k_(k), sum_(size_t(k * k), 0.0) {
  LLM_CHECK(k > 0) << "a Hessian of " << k << " input features";
  pool_ = &pool_for(threads, own_pool_);
}

HessianAccumulator::~HessianAccumulator() = default;

void HessianAccumulator::add(const float* x, int64_t rows, int64_t samples) {
  LLM_CHECK(rows >= 0) << rows << " calibration rows";
  if (samples < 0) samples = rows;
  // Rows in tiles (converted to double once), each tile added to every element in row order.
  constexpr int64_t kTile = 64;
  const int64_t k = k_;
  std::vector<double> tile(size_t(kTile * k));
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    const int64_t nr = std::min(kTile, rows - r0);
    for (int64_t i = 0; i < nr * k; ++i) tile[size_t(i)] = double(x[r0 * k + i]);
    parallel_triangle_rows(*pool_, k, [&](int64_t i) {
      double* si = &sum_[size_t(i * k)];
      for (int64_t r = 0; r < nr; ++r) {
        const double* xr = &tile[size_t(r * k)];
        const double xi = xr[i];
        for (int64_t j = i; j < k; ++j) si[j] += xi * xr[j];
      }
    });
  }
  samples_ += samples;
  h_valid_ = false;
}

const std::vector<double>& HessianAccumulator::h() const {
  if (h_valid_) return h_;
  h_.assign(size_t(k_ * k_), 0.0);
  if (samples_ > 0) {
    const double f = 2.0 / double(samples_);
    for (int64_t i = 0; i < k_; ++i)
      for (int64_t j = i; j < k_; ++j) h_[size_t(i * k_ + j)] = h_[size_t(j * k_ + i)] = f * sum_[size_t(i * k_ + j)];
  }
  h_valid_ = true;
  return h_;
}

}  // namespace llmctl::quant
