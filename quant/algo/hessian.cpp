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
  // Rows i and i + 1 of the triangle together (each x[j] loaded once for both), four tile rows per
  // pass (a quarter of the stores). Per element: target += (a0 x0 + a1 x1) + (a2 x2 + a3 x3) for
  // each group of four rows, then the leftover rows one by one.
  parallel_triangle_rows(*pool_, (k + 1) / 2, [&](int64_t pair) {
    const int64_t i = 2 * pair;
    const bool two = i + 1 < k;
    double* si = &target[size_t(i * k)];
    double* sn = two ? si + k : nullptr;
    int64_t r = 0;
    for (; r + 4 <= nr; r += 4) {
      const double* x0 = tile + r * k;
      const double *x1 = x0 + k, *x2 = x1 + k, *x3 = x2 + k;
      const double a0 = x0[i], a1 = x1[i], a2 = x2[i], a3 = x3[i];
      si[i] += (a0 * x0[i] + a1 * x1[i]) + (a2 * x2[i] + a3 * x3[i]);
      if (!two) continue;
      const double b0 = x0[i + 1], b1 = x1[i + 1], b2 = x2[i + 1], b3 = x3[i + 1];
      for (int64_t j = i + 1; j < k; ++j) {
        const double y0 = x0[j], y1 = x1[j], y2 = x2[j], y3 = x3[j];
        si[j] += (a0 * y0 + a1 * y1) + (a2 * y2 + a3 * y3);
        sn[j] += (b0 * y0 + b1 * y1) + (b2 * y2 + b3 * y3);
      }
    }
    for (; r < nr; ++r) {
      const double* xr = tile + r * k;
      const double a = xr[i];
      si[i] += a * xr[i];
      if (!two) continue;
      const double b = xr[i + 1];
      for (int64_t j = i + 1; j < k; ++j) {
        si[j] += a * xr[j];
        sn[j] += b * xr[j];
      }
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
