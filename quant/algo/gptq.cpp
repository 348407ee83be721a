#include "quant/algo/gptq.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "engine/core/error.h"
#include "quant/algo/linalg.h"
#include "quant/algo/rtn.h"

namespace llmctl::quant {

namespace {

// Rows processed together so each row of U read from memory serves several weight rows.
constexpr int64_t kRowTile = 8;

struct Problem {
  int64_t n, k;
  std::vector<double> u;        // [K, K] upper Cholesky factor of H^-1 (permuted)
  std::vector<int64_t> perm;    // permuted column j is original column perm[j]
  std::vector<int32_t> group;   // [K] group of permuted column j
  QuantizedLinear* out;         // scales and zeros (rewritten per row when update_group_qparams)
  bool update_group_qparams = false;
  int64_t group_size = 0;       // columns per group (K: per channel)
};

// GPTQ over rows [r0, r1): codes (original column order) into q, per-row loss into loss.
// w: the [N, K] working weight (permuted columns), updated in place.
void quantize_rows(const Problem& p, int64_t r0, int64_t r1, int block, std::vector<double>& w,
                   std::vector<uint8_t>& q, std::vector<double>& loss) {
  const int64_t k = p.k, g = p.out->groups();
  const QuantScheme& s = p.out->scheme;
  std::vector<double> err(size_t(kRowTile * block));
  for (int64_t t0 = r0; t0 < r1; t0 += kRowTile) {
    const int64_t t1 = std::min(r1, t0 + kRowTile);
    for (int64_t i1 = 0; i1 < k; i1 += block) {
      const int64_t i2 = std::min(k, i1 + block);
      for (int64_t i = i1; i < i2; ++i) {
        const double* ui = &p.u[size_t(i * k)];
        if (p.update_group_qparams && i % p.group_size == 0)  // columns [i, i + group) are in this block
          for (int64_t r = t0; r < t1; ++r) {
            const double* wr = &w[size_t(r * k)];
            float lo = float(wr[i]), hi = lo;
            for (int64_t c = i; c < i + p.group_size; ++c) {
              lo = std::min(lo, float(wr[c]));
              hi = std::max(hi, float(wr[c]));
            }
            const size_t gi = size_t(r * g + p.group[size_t(i)]);
            group_qparams(lo, hi, s, &p.out->scales[gi], &p.out->zeros[gi]);
          }
        for (int64_t r = t0; r < t1; ++r) {
          double* wr = &w[size_t(r * k)];
          const size_t gi = size_t(r * g + p.group[size_t(i)]);
          const float scale = p.out->scales[gi];
          const int32_t zero = p.out->zeros[gi];
          const uint8_t code = quantize_value(float(wr[i]), scale, zero, s);
          q[size_t(r * k + p.perm[size_t(i)])] = code;
          const double e = (wr[i] - double(float(int32_t(code) - zero) * scale)) / ui[i];
          loss[size_t(r)] += e * e;
          err[size_t((r - t0) * block + (i - i1))] = e;
          for (int64_t c = i + 1; c < i2; ++c) wr[c] -= e * ui[c];
        }
      }
      // Lazy update of the columns after the block: W[:, i2:] -= Err @ U[i1:i2, i2:]. Each row of U
      // serves the whole tile of rows while it is in cache; every row still subtracts in j order.
      for (int64_t j = i1; j < i2; ++j) {
        const double* uj = &p.u[size_t(j * k)];
        for (int64_t r = t0; r < t1; ++r) {
          double* wr = &w[size_t(r * k)];
          const double e = err[size_t((r - t0) * block + (j - i1))];
          for (int64_t c = i2; c < k; ++c) wr[c] -= e * uj[c];
        }
      }
    }
  }
}

}  // namespace

GptqResult gptq_quantize(const float* w, int64_t n, int64_t k, const std::vector<double>& h, const GptqOptions& o) {
  o.scheme.check(k);
  LLM_CHECK(n > 0) << "a weight with " << n << " output features";
  LLM_CHECK(h.size() == size_t(k * k)) << "Hessian of " << h.size() << " elements for " << k << " input features";
  LLM_CHECK(o.block_size > 0) << "GPTQ block size " << o.block_size;
  LLM_CHECK(o.dampening >= 0 && std::isfinite(o.dampening)) << "GPTQ dampening " << o.dampening;
  LLM_REQUIRE(!(o.update_group_qparams && o.act_order))
      << "GPTQ: group qparams from the updated weights need groups of consecutive columns, not act-order";
  for (double v : h) LLM_CHECK(std::isfinite(v)) << "the Hessian has a non-finite element (calibration activations overflowed?)";

  std::unique_ptr<ThreadPool> own_pool;
  ThreadPool& pool = pool_for(o.threads, own_pool);

  GptqResult res;
  QuantizedLinear& out = res.weight;
  out.n = n;
  out.k = k;
  out.scheme = o.scheme;
  rtn_qparams(w, n, k, o.scheme, out.scales, out.zeros);  // 1. fixed from the weight as given

  Problem p;
  p.n = n;
  p.k = k;
  p.out = &out;
  p.perm.resize(size_t(k));
  std::iota(p.perm.begin(), p.perm.end(), 0);
  if (o.act_order)  // 2. descending diag(H); ties (dead columns) keep their order
    std::stable_sort(p.perm.begin(), p.perm.end(),
                     [&](int64_t a, int64_t b) { return h[size_t(a * k + a)] > h[size_t(b * k + b)]; });
  const int64_t gs = o.scheme.group_size <= 0 ? k : o.scheme.group_size;
  p.update_group_qparams = o.update_group_qparams;
  p.group_size = gs;
  int block = o.block_size;
  if (o.update_group_qparams) block = int(std::max<int64_t>(gs, block / gs * gs));
  p.group.resize(size_t(k));
  for (int64_t j = 0; j < k; ++j) p.group[size_t(j)] = int32_t(p.perm[size_t(j)] / gs);

  std::vector<double> hp(size_t(k * k));
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < k; ++j) hp[size_t(i * k + j)] = h[size_t(p.perm[size_t(i)] * k + p.perm[size_t(j)])];
  std::vector<double> wp(size_t(n * k));  // [N, K] working weight, permuted columns
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < k; ++j) wp[size_t(r * k + j)] = double(w[r * k + p.perm[size_t(j)]]);

  double mean_diag = 0;  // 3. dead inputs
  for (int64_t i = 0; i < k; ++i) {
    double& d = hp[size_t(i * k + i)];
    if (d == 0) {
      d = 1;
      ++res.dead_columns;
      for (int64_t r = 0; r < n; ++r) wp[size_t(r * k + i)] = 0;
    }
    mean_diag += d;
  }
  mean_diag /= double(k);
  if (res.dead_columns)
    res.notes.push_back(std::to_string(res.dead_columns) + " input(s) never active in calibration: weights zeroed");

  // 4. damp and factor, raising the dampening until H + damp I is positive definite.
  double damp = o.dampening;
  bool factored = false;
  for (;;) {
    std::vector<double> hd = hp;
    for (int64_t i = 0; i < k; ++i) hd[size_t(i * k + i)] += damp * mean_diag;
    if (upper_cholesky_of_inverse(hd, k, p.u, pool)) {
      factored = true;
      break;
    }
    const double next = damp == 0 ? 1e-4 : damp * 10;
    if (next > kMaxDampening) break;
    std::ostringstream note;
    note << "Hessian not positive definite at dampening " << damp << ": raised to " << next;
    res.notes.push_back(note.str());
    damp = next;
  }
  res.dampening_used = damp;
  if (!factored) {  // llm-compressor's fallback: the identity factor, i.e. RTN with no error feedback
    res.rtn_fallback = true;
    res.notes.push_back("Hessian could not be factored at any dampening up to " + std::to_string(kMaxDampening) +
                        ": round to nearest instead");
    p.u.assign(size_t(k * k), 0.0);
    for (int64_t i = 0; i < k; ++i) p.u[size_t(i * k + i)] = 1;
  }

  // 5. and 6.: rows in parallel, codes written back to original column positions.
  out.q.assign(size_t(n * k), 0);
  std::vector<double> row_loss(size_t(n), 0.0);
  pool.parallel_for(n, [&](int64_t r0, int64_t r1) { quantize_rows(p, r0, r1, block, wp, out.q, row_loss); });
  for (double l : row_loss) res.loss += l / 2;
  return res;
}

}  // namespace llmctl::quant
