// Device sampling: one 1024-thread block per job over one logits row (see sampling.cuh).
// Every reduction has a fixed order (CUB block reductions, per-thread strided or contiguous
// partial sums, integer atomics only), so a job's token depends on its row and parameters alone.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <climits>
#include <cmath>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/sampling.cuh"

namespace llmctl::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr double kFixedOne = 4503599627370496.0;  // 2^52: top-p masses in fixed point

struct ArgMax {
  float v;
  int i;
};
struct ArgMaxOp {
  __device__ ArgMax operator()(const ArgMax& a, const ArgMax& b) const {
    if (a.v > b.v) return a;
    if (b.v > a.v) return b;
    if (a.v == b.v) return a.i < b.i ? a : b;
    return a.i < b.i ? a : b;  // NaN on either side: keep a deterministic choice
  }
};
struct MaxF {
  __device__ float operator()(float a, float b) const { return b > a ? b : a; }
};
struct MaxI {
  __device__ int operator()(int a, int b) const { return b > a ? b : a; }
};
struct MinI {
  __device__ int operator()(int a, int b) const { return b < a ? b : a; }
};

struct Shared {
  union {
    cub::BlockReduce<double, kThreads>::TempStorage sum_d;
    cub::BlockReduce<float, kThreads>::TempStorage max_f;
    cub::BlockReduce<int, kThreads>::TempStorage red_i;
    cub::BlockReduce<ArgMax, kThreads>::TempStorage arg;
    cub::BlockScan<int, kThreads>::TempStorage scan_i;
    cub::BlockScan<unsigned long long, kThreads>::TempStorage scan_u;
    cub::BlockScan<double, kThreads>::TempStorage scan_d;
  } cub;
  unsigned int count[256];
  unsigned long long mass[256];
  double d;
  float f;
  int i;
  uint32_t u;
  unsigned long long ull;
};

// A float's bits as an unsigned integer that orders like the float (the host's rank_key).
__device__ __forceinline__ uint32_t order_bits(float v) {
  const uint32_t b = __float_as_uint(v);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// engine/sample/vec_math.cpp's exp_nonpositive, operation for operation (no fused multiply-add).
__device__ float exp_nonpositive(float x) {
  const uint32_t keep = 0u - uint32_t(x > -87.0f);
  const float t = __fmul_rn(x, 1.44269504088896341f);
  const float r = __fsub_rn(__fadd_rn(t, 12582912.0f), 12582912.0f);
  const float f = __fmul_rn(__fsub_rn(t, r), 0.693147180559945309f);
  float p = 1.0f / 5040.0f;
  p = __fadd_rn(__fmul_rn(p, f), 1.0f / 720.0f);
  p = __fadd_rn(__fmul_rn(p, f), 1.0f / 120.0f);
  p = __fadd_rn(__fmul_rn(p, f), 1.0f / 24.0f);
  p = __fadd_rn(__fmul_rn(p, f), 1.0f / 6.0f);
  p = __fadd_rn(__fmul_rn(p, f), 0.5f);
  p = __fadd_rn(__fmul_rn(p, f), 1.0f);
  p = __fadd_rn(__fmul_rn(p, f), 1.0f);
  const int32_t ri = t > -126.0f ? int32_t(r) : -126;
  const uint32_t scale_bits = (uint32_t(ri + 127) << 23) & keep;
  return __uint_as_float(__float_as_uint(__fmul_rn(p, __uint_as_float(scale_bits))) & keep);
}

__device__ __forceinline__ unsigned long long fixed_mass(float p) {
  return p > 0.f ? (unsigned long long)(double(p) * kFixedOne) : 0ull;
}

// Block-wide results, broadcast to every thread (all threads must call).
__device__ double block_sum(double v, Shared& s) {
  const double r = cub::BlockReduce<double, kThreads>(s.cub.sum_d).Sum(v);
  if (threadIdx.x == 0) s.d = r;
  __syncthreads();
  const double out = s.d;
  __syncthreads();
  return out;
}
__device__ float block_max(float v, Shared& s) {
  const float r = cub::BlockReduce<float, kThreads>(s.cub.max_f).Reduce(v, MaxF());
  if (threadIdx.x == 0) s.f = r;
  __syncthreads();
  const float out = s.f;
  __syncthreads();
  return out;
}
template <class Op>
__device__ int block_reduce_int(int v, Op op, Shared& s) {
  const int r = cub::BlockReduce<int, kThreads>(s.cub.red_i).Reduce(v, op);
  if (threadIdx.x == 0) s.i = r;
  __syncthreads();
  const int out = s.i;
  __syncthreads();
  return out;
}
__device__ int block_argmax(const float* x, int V, Shared& s) {
  ArgMax a{-INFINITY, INT_MAX};
  for (int i = threadIdx.x; i < V; i += kThreads) a = ArgMaxOp()(a, ArgMax{x[i], i});
  const ArgMax r = cub::BlockReduce<ArgMax, kThreads>(s.cub.arg).Reduce(a, ArgMaxOp());
  if (threadIdx.x == 0) s.i = r.i == INT_MAX ? 0 : r.i;  // all NaN: token 0, as the host
  __syncthreads();
  const int out = s.i;
  __syncthreads();
  return out;
}

// Each thread's contiguous range of ids (for walks that need id order).
struct Range {
  int lo, hi;
};
__device__ Range my_range(int V) {
  const int chunk = (V + kThreads - 1) / kThreads;
  const int lo = min(V, int(threadIdx.x) * chunk);
  return {lo, min(V, lo + chunk)};
}

// Top-k bar: element i is among the k largest (ties to the lower id) iff
// order_bits(x[i]) > bar or (== bar and i <= tie). Radix select, 8 bits per pass.
__device__ void top_k_bar(const float* x, int V, int k, Shared& s, uint32_t& bar, int& tie) {
  uint32_t prefix = 0, mask = 0;
  int need = k;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += kThreads) s.count[i] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < V; i += kThreads) {
      const uint32_t b = order_bits(x[i]);
      if ((b & mask) == prefix) atomicAdd(&s.count[(b >> shift) & 255u], 1u);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int acc = 0, d = 255;
      for (; d > 0; --d) {
        if (acc + int(s.count[d]) >= need) break;
        acc += int(s.count[d]);
      }
      s.u = prefix | (uint32_t(d) << shift);
      s.i = need - acc;
    }
    __syncthreads();
    prefix = s.u;
    need = s.i;
    mask |= 255u << shift;
    __syncthreads();
  }
  // The need-th element equal to the bar, in id order.
  const Range r = my_range(V);
  int mine = 0;
  for (int i = r.lo; i < r.hi; ++i) mine += order_bits(x[i]) == prefix;
  int before = 0;
  cub::BlockScan<int, kThreads>(s.cub.scan_i).ExclusiveSum(mine, before);
  if (threadIdx.x == 0) s.i = V - 1;
  __syncthreads();
  if (before < need && before + mine >= need) {
    int seen = before;
    for (int i = r.lo; i < r.hi; ++i)
      if (order_bits(x[i]) == prefix && ++seen == need) {
        s.i = i;
        break;
      }
  }
  __syncthreads();
  bar = prefix;
  tie = s.i;
  __syncthreads();
}

// Top-p cut over probabilities p (>= 0): the smallest prefix of (p desc, id asc) whose mass reaches
// target; element i is kept iff bits(p[i]) > bar or (== bar and i <= tie).
__device__ void top_p_bar(const float* p, int V, unsigned long long target, Shared& s, uint32_t& bar, int& tie) {
  uint32_t prefix = 0, mask = 0;
  unsigned long long need = target;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += kThreads) s.mass[i] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < V; i += kThreads) {
      const uint32_t b = __float_as_uint(p[i]);
      if ((b & mask) == prefix) atomicAdd(&s.mass[(b >> shift) & 255u], fixed_mass(p[i]));
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned long long acc = 0;
      int d = 255;
      for (; d > 0; --d) {
        if (acc + s.mass[d] >= need) break;
        acc += s.mass[d];
      }
      s.u = prefix | (uint32_t(d) << shift);
      s.ull = need - acc;
    }
    __syncthreads();
    prefix = s.u;
    need = s.ull;
    mask |= 255u << shift;
    __syncthreads();
  }
  const Range r = my_range(V);
  unsigned long long mine = 0;
  for (int i = r.lo; i < r.hi; ++i)
    if (__float_as_uint(p[i]) == prefix) mine += fixed_mass(p[i]);
  unsigned long long before = 0;
  cub::BlockScan<unsigned long long, kThreads>(s.cub.scan_u).ExclusiveSum(mine, before);
  if (threadIdx.x == 0) s.i = V - 1;  // mass never reached: keep every tied element
  __syncthreads();
  if (before < need && before + mine >= need) {
    unsigned long long acc = before;
    for (int i = r.lo; i < r.hi; ++i)
      if (__float_as_uint(p[i]) == prefix) {
        acc += fixed_mass(p[i]);
        if (acc >= need) {
          s.i = i;
          break;
        }
      }
  }
  __syncthreads();
  bar = prefix;
  tie = s.i;
  __syncthreads();
}

// p[i] *= float(1 / sum p), the host's normalize.
__device__ void normalize(float* p, int V, Shared& s) {
  double part = 0;
  for (int i = threadIdx.x; i < V; i += kThreads) part += double(p[i]);
  const double total = block_sum(part, s);
  const float inv = __double2float_rn(1.0 / total);
  for (int i = threadIdx.x; i < V; i += kThreads) p[i] = __fmul_rn(p[i], inv);
  __syncthreads();
}

__global__ void __launch_bounds__(kThreads) sample_kernel(SampleParams P) {
  __shared__ Shared s;
  const SampleJobDev job = P.jobs[blockIdx.x];
  // V: the candidates (a model's padded rows past the tokenizer are not); rows are P.vocab wide.
  const int V = min(job.vocab, int(P.vocab)), tid = threadIdx.x;
  const float* src = P.logits + int64_t(job.row) * P.vocab;
  int32_t* token_out = P.tokens + blockIdx.x;

  if (job.temperature <= 0.f && job.edit_begin == job.edit_end) {  // plain greedy: read in place
    const int t = block_argmax(src, V, s);
    if (tid == 0) *token_out = t;
    return;
  }
  float* x = P.scratch + int64_t(blockIdx.x) * P.vocab;
  for (int i = tid; i < V; i += kThreads) x[i] = src[i];
  __syncthreads();
  for (int e = job.edit_begin + tid; e < job.edit_end; e += kThreads) {  // ids are unique per job
    const LogitEditDev ed = P.edits[e];
    if (ed.id < 0 || ed.id >= V) continue;
    float l = x[ed.id];
    if (ed.flags & kEditBias) l = __fadd_rn(l, ed.bias);
    if (ed.flags & kEditSuppress) l = -INFINITY;
    if (ed.flags & kEditSubtract) l = __fsub_rn(l, ed.sub);
    if (ed.flags & kEditRepeat) l = l > 0.f ? __fdiv_rn(l, job.repetition) : __fmul_rn(l, job.repetition);
    x[ed.id] = l;
  }
  __syncthreads();
  if (job.temperature <= 0.f) {
    const int t = block_argmax(x, V, s);
    if (tid == 0) *token_out = x[t] == -INFINITY ? -1 : t;  // every token suppressed: -1, as the host
    return;
  }

  float m = -INFINITY;
  for (int i = tid; i < V; i += kThreads) m = x[i] > m ? x[i] : m;
  m = block_max(m, s);
  if (!isfinite(m)) {  // every token suppressed: the host reports the error
    if (tid == 0) *token_out = -1;
    return;
  }
  // Temperature and top-k: x becomes exp((l - max) / T) for the k largest, 0 elsewhere.
  uint32_t kbar = 0;
  int ktie = V - 1;
  const bool top_k = job.top_k > 0 && job.top_k < V;
  if (top_k) top_k_bar(x, V, job.top_k, s, kbar, ktie);
  const float inv_t = __fdiv_rn(1.0f, job.temperature);
  for (int i = tid; i < V; i += kThreads) {
    const uint32_t b = order_bits(x[i]);
    const bool keep = !top_k || b > kbar || (b == kbar && i <= ktie);
    x[i] = keep ? exp_nonpositive(__fmul_rn(__fsub_rn(x[i], m), inv_t)) : 0.f;
  }
  __syncthreads();
  normalize(x, V, s);

  if (job.top_p < 1.f) {
    uint32_t pbar = 0;
    int ptie = V - 1;
    const auto target = (unsigned long long)ceil(double(job.top_p) * kFixedOne);
    top_p_bar(x, V, target, s, pbar, ptie);
    for (int i = tid; i < V; i += kThreads) {
      const uint32_t b = __float_as_uint(x[i]);
      if (!(b > pbar || (b == pbar && i <= ptie))) x[i] = 0.f;
    }
    __syncthreads();
    normalize(x, V, s);
  }
  if (job.min_p > 0.f) {
    float pmax = 0.f;
    for (int i = tid; i < V; i += kThreads) pmax = x[i] > pmax ? x[i] : pmax;
    pmax = block_max(pmax, s);
    const float floor_p = __fmul_rn(job.min_p, pmax);
    for (int i = tid; i < V; i += kThreads)
      if (x[i] < floor_p) x[i] = 0.f;
    __syncthreads();
    normalize(x, V, s);
  }

  // Inverse CDF in id order: each thread walks its range from the mass before it; the first
  // crossing over all threads wins.
  const Range r = my_range(V);
  double part = 0;
  int last = -1;
  for (int i = r.lo; i < r.hi; ++i)
    if (x[i] > 0.f) {
      part += double(x[i]);
      last = i;
    }
  double before = 0;
  cub::BlockScan<double, kThreads>(s.cub.scan_d).ExclusiveSum(part, before);
  __syncthreads();
  int found = INT_MAX;
  double cum = before;
  for (int i = r.lo; i < r.hi; ++i)
    if (x[i] > 0.f) {
      cum += double(x[i]);
      if (job.u < cum) {
        found = i;
        break;
      }
    }
  found = block_reduce_int(found, MinI(), s);
  last = block_reduce_int(last, MaxI(), s);
  if (tid == 0) *token_out = found != INT_MAX ? found : last;  // u within rounding of the total
}

}  // namespace

void launch_sample(const SampleParams& p, cudaStream_t stream) {
  KERNEL_CHECK(p.vocab > 0 && p.vocab < (int64_t(1) << 30)) << "sample: vocab " << p.vocab;
  KERNEL_CHECK(p.logits && p.jobs && p.scratch && p.tokens) << "sample: missing buffers";
  if (p.num_jobs == 0) return;
  sample_kernel<<<unsigned(p.num_jobs), kThreads, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace llmctl::cuda
