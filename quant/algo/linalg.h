// Dense double-precision linear algebra for GPTQ: the Cholesky factor GPTQ's updates use, and the
// thread helpers the quantize algorithms share. Matrices are [K, K] row-major std::vector<double>.
// Every element is computed by the same sequence of operations whatever the thread count, so
// results never depend on it.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/core/thread_pool.h"

namespace llmctl::quant {

// The pool to run on: threads 0 is the process-wide pool; otherwise a pool of that many threads
// (owned by `own`, which must outlive its use).
ThreadPool& pool_for(int threads, std::unique_ptr<ThreadPool>& own);

// fn(i) for every i in [0, n) where the work of row i shrinks as n - i (triangular matrices):
// rows are paired (i, n-1-i) so each thread gets an equal share.
void parallel_triangle_rows(ThreadPool& pool, int64_t n, const std::function<void(int64_t)>& fn);

// In place: the lower Cholesky factor L of a symmetric positive definite a [k, k] (a = L L^T; only
// the lower triangle of a is read, the upper one is zeroed). Returns false, leaving a partly
// overwritten, when a pivot is not positive and finite (a is not numerically positive definite).
bool cholesky_lower(std::vector<double>& a, int64_t k, ThreadPool& pool);

// The upper triangular U with U^T U = h^-1 (the "upper Cholesky factor of the inverse" GPTQ runs
// on) for a symmetric positive definite h [k, k]. Computed without forming h^-1: with P the
// order-reversing permutation, P h P = L L^T gives h = V V^T with V = P L P upper, so U = V^-1 =
// P L^-1 P. Returns false when h is not numerically positive definite (u is then unspecified).
bool upper_cholesky_of_inverse(const std::vector<double>& h, int64_t k, std::vector<double>& u, ThreadPool& pool);

}  // namespace llmctl::quant
