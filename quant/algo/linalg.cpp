#include "quant/algo/linalg.h"

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

double dot(const double* a, const double* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// Rows below this many are not worth a pool dispatch (the result is the same either way).
constexpr int64_t kSerialRows = 32;

}  // namespace

bool cholesky_lower(std::vector<double>& a, int64_t k, ThreadPool& pool) {
  // Left-looking by columns: column j needs rows 0..j of L, all already final.
  for (int64_t j = 0; j < k; ++j) {
    double* rj = &a[size_t(j * k)];
    const double d = rj[j] - dot(rj, rj, j);
    if (!(d > 0) || !std::isfinite(d)) return false;
    const double ljj = std::sqrt(d);
    rj[j] = ljj;
    auto column = [&](int64_t begin, int64_t end) {
      for (int64_t i = j + 1 + begin; i < j + 1 + end; ++i) {
        double* ri = &a[size_t(i * k)];
        ri[j] = (ri[j] - dot(ri, rj, j)) / ljj;
      }
    };
    const int64_t below = k - j - 1;
    if (below < kSerialRows)
      column(0, below);
    else
      pool.parallel_for(below, column);
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

  // Y = (L^-1)^T, upper: row j of Y is column j of L^-1, forward substitution of L x = e_j (rows
  // independent, contiguous in memory):
  //   Y[j][j] = 1 / L[j][j];  Y[j][i] = -(sum_{m=j}^{i-1} Y[j][m] L[i][m]) / L[i][i]  for i > j.
  std::vector<double> y(size_t(k * k), 0.0);
  parallel_triangle_rows(pool, k, [&](int64_t j) {
    double* yj = &y[size_t(j * k)];
    yj[j] = 1.0 / l[size_t(j * k + j)];
    for (int64_t i = j + 1; i < k; ++i) {
      const double* li = &l[size_t(i * k)];
      yj[i] = -dot(yj + j, li + j, i - j) / li[i];
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
