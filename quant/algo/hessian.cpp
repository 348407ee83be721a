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

namespace {
// Rows per tile: a tile (converted to double) is added to the whole upper triangle at once.
constexpr int64_t kTile = 64;
}  // namespace

void HessianAccumulator::accumulate(std::vector<double>& target, const double* tile, int64_t nr) const {
  const int64_t k = k_;
  parallel_triangle_rows(*pool_, k, [&](int64_t i) {
    double* si = &target[size_t(i * k)];
    int64_t r = 0;
    for (; r + 4 <= nr; r += 4) {  // four rows per pass over si: a quarter of the stores
      const double* x0 = tile + r * k;
      const double *x1 = x0 + k, *x2 = x1 + k, *x3 = x2 + k;
      const double a0 = x0[i], a1 = x1[i], a2 = x2[i], a3 = x3[i];
      for (int64_t j = i; j < k; ++j) si[j] += (a0 * x0[j] + a1 * x1[j]) + (a2 * x2[j] + a3 * x3[j]);
    }
    for (; r < nr; ++r) {
      const double* xr = tile + r * k;
      const double xi = xr[i];
      for (int64_t j = i; j < k; ++j) si[j] += xi * xr[j];
    }
  });
}

void HessianAccumulator::add(const float* x, int64_t rows, int64_t samples) {
  LLM_CHECK(rows >= 0) << rows << " calibration rows";
  if (samples < 0) samples = rows;
  if (pending_.empty()) pending_.resize(size_t(kTile * k_));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < k_; ++c) pending_[size_t(pending_rows_ * k_ + c)] = double(x[r * k_ + c]);
    if (++pending_rows_ == kTile) {
      accumulate(sum_, pending_.data(), kTile);
      pending_rows_ = 0;
    }
  }
  samples_ += samples;
  h_valid_ = false;
}

const std::vector<double>& HessianAccumulator::h() const {
  if (h_valid_) return h_;
  std::vector<double> s = sum_;
  if (pending_rows_ > 0) accumulate(s, pending_.data(), pending_rows_);  // as the next add() would
  h_.assign(size_t(k_ * k_), 0.0);
  if (samples_ > 0) {
    const double f = 2.0 / double(samples_);
    for (int64_t i = 0; i < k_; ++i)
      for (int64_t j = i; j < k_; ++j) h_[size_t(i * k_ + j)] = h_[size_t(j * k_ + i)] = f * s[size_t(i * k_ + j)];
  }
  h_valid_ = true;
  return h_;
}

}  // namespace llmctl::quant
