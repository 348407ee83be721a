#include "quant/algo/linalg.h"

#include <algorithm>
#include <cmath>

namespace llmctl::quant {

ThreadPool& pool_for(int threads, std::unique_ptr<ThreadPool>& own) {
  if (threads <= 0) return ThreadPool::global();
  own = std::make_unique<ThreadPool>(threads);
  return *own;
}

void parallel_triangle_rows(ThreadPool& pool, int64_t n, const std::function<void(int64_t)>& fn) {
  const int64_t pairs = (n + 1) / 2;
  pool.parallel_for(pairs, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      fn(t);
      if (n - 1 - t != t) fn(n - 1 - t);
    }
  });
}

namespace {

// Four independent partial sums (a fixed order, so the same bits on every thread count): the
// loop runs at the FMA throughput instead of the add latency.
double dot(const double* a, const double* b, int64_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; ++i) s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

// Columns per block: the block's rows (kBlock x K doubles) stay in cache while every row below
// streams past them once, instead of once per column.
constexpr int64_t kBlock = 64;

}  // namespace

bool cholesky_lower(std::vector<double>& a, int64_t k, ThreadPool& pool) {
  // Left-looking, by blocks of columns [j0, j1):
  //   (1) every row i >= j0 subtracts the contribution of the finished columns < j0 from its
  //       entries in the block: a[i][c] -= L[i][0:j0] . L[c][0:j0];
  //   (2) the diagonal block is factored on its own;
  //   (3) every row below it solves for its block entries against the diagonal block.
  for (int64_t j0 = 0; j0 < k; j0 += kBlock) {
    const int64_t j1 = std::min(k, j0 + kBlock);
    if (j0 > 0)
      pool.parallel_for(k - j0, [&](int64_t begin, int64_t end) {
        for (int64_t i = j0 + begin; i < j0 + end; ++i) {
          double* ri = &a[size_t(i * k)];
          for (int64_t c = j0; c < std::min(j1, i + 1); ++c) ri[c] -= dot(ri, &a[size_t(c * k)], j0);
        }
      });
    for (int64_t c = j0; c < j1; ++c) {
      double* rc = &a[size_t(c * k)];
      const double d = rc[c] - dot(rc + j0, rc + j0, c - j0);
      if (!(d > 0) || !std::isfinite(d)) return false;
      rc[c] = std::sqrt(d);
      for (int64_t i = c + 1; i < j1; ++i) {
        double* ri = &a[size_t(i * k)];
        ri[c] = (ri[c] - dot(ri + j0, rc + j0, c - j0)) / rc[c];
      }
    }
    pool.parallel_for(k - j1, [&](int64_t begin, int64_t end) {
      for (int64_t i = j1 + begin; i < j1 + end; ++i) {
        double* ri = &a[size_t(i * k)];
        for (int64_t c = j0; c < j1; ++c) {
          const double* rc = &a[size_t(c * k)];
          ri[c] = (ri[c] - dot(ri + j0, rc + j0, c - j0)) / rc[c];
        }
      }
    });
  }
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = i + 1; j < k; ++j) a[size_t(i * k + j)] = 0;
  return true;
}

bool upper_cholesky_of_inverse(const std::vector<double>& h, int64_t k, std::vector<double>& u, ThreadPool& pool) {
  // L L^T = P h P (lower triangle only).
  std::vector<double> l(size_t(k * k), 0.0);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j <= i; ++j) l[size_t(i * k + j)] = h[size_t((k - 1 - i) * k + (k - 1 - j))];
  if (!cholesky_lower(l, k, pool)) return false;

  // Y = (L^-1)^T, upper: row j of Y is column j of L^-1, forward substitution of L x = e_j:
  //   Y[j][j] = 1 / L[j][j];  Y[j][i] = -(sum_{m=j}^{i-1} Y[j][m] L[i][m]) / L[i][i]  for i > j.
  // Rows of Y are independent; a block of them is advanced together over i, so each row of L is
  // read once per block. Blocks are paired (first with last) to balance the threads.
  std::vector<double> y(size_t(k * k), 0.0);
  const int64_t blocks = (k + kBlock - 1) / kBlock;
  parallel_triangle_rows(pool, blocks, [&](int64_t b) {
    const int64_t j0 = b * kBlock, j1 = std::min(k, j0 + kBlock);
    for (int64_t j = j0; j < j1; ++j) y[size_t(j * k + j)] = 1.0 / l[size_t(j * k + j)];
    for (int64_t i = j0 + 1; i < k; ++i) {
      const double* li = &l[size_t(i * k)];
      for (int64_t j = j0; j < std::min(j1, i); ++j) {
        double* yj = &y[size_t(j * k)];
        yj[i] = -dot(yj + j, li + j, i - j) / li[i];
      }
    }
  });

  // U = P L^-1 P: U[i][j] = (L^-1)[k-1-i][k-1-j] = Y[k-1-j][k-1-i].
  u.assign(size_t(k * k), 0.0);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = i; j < k; ++j) u[size_t(i * k + j)] = y[size_t((k - 1 - j) * k + (k - 1 - i))];
  for (double v : u)
    if (!std::isfinite(v)) return false;
  return true;
}

}  // namespace llmctl::quant
