// Split-context decode attention (one query token per sequence), partitions merged in the same kernel.
#include <algorithm>
#include <cmath>

#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/attention_internal.cuh"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/kv_codes.cuh"

namespace llmctl::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kTile = 32;       // partition lengths are multiples of this
constexpr int kMaxPart = 1024;  // longest partition: bounds the scores buffer in shared memory
constexpr int kTPK = 4;         // threads sharing one key in Q K^T (each a quarter of the head dim)
constexpr int kKeysPerPass = kThreads / kTPK;
constexpr float kLog2e = 1.4426950408889634f;

// A score in log2 units (scale * q.k * log2 e) soft-capped: cap * tanh(s / cap), back in log2 units.
__device__ __forceinline__ float softcap_log2(float score_l2, float cap) {
  return cap * tanhf(score_l2 / (kLog2e * cap)) * kLog2e;
}

// q heads per block (the kernel's NG) for a GQA group of G query heads per kv head
inline int ng_of(int G) { return G == 1 ? 1 : G <= 4 ? 4 : 8; }

// Block (partition, kv head x head chunk, sequence). NG = q heads handled per block (compile time;
// a chunk may use fewer, ng). Scores of the whole partition live in shared memory, so the softmax
// inside a partition is exact; the last partition of a row to finish merges them (log2 domain).
// Shared memory (dynamic, floats): scores [NG][part_len], later partial sums [R][NG][D].
// Every phase issues its loads for several keys before using any of them: at batch 1 the kernel is
// bound by memory latency, not bandwidth. S: what the cache stores (kv_codes.cuh reads it).
template <class T, int D, int NG, KvStorage S>
__global__ void __launch_bounds__(kThreads) decode_kernel(AttentionParams p, int part_len, int num_parts) {
  extern __shared__ float smem[];
  __shared__ __align__(16) float q_s[NG][D];
  __shared__ float m_s[NG], l_s[NG];
  __shared__ int32_t slot_s[kMaxPart];  // cache slot of each key of the partition
  const int tid = threadIdx.x;
  const int row = blockIdx.z;  // workspace row: a sequence, or a token in per-token mode
  int s, q0;
  if (p.token_seq) {
    q0 = row;
    s = p.token_seq[row];
  } else {
    s = row;
    q0 = p.query_start[s];
    if (p.query_start[s + 1] - q0 != 1) return;  // prefill sequences use the prefill kernel
  }
  // Keys [first, kv_len): the whole context, or a sliding window's last p.window; partitions are
  // counted from `first`.
  const int kv_len = p.positions[q0] + 1;
  const int first = p.window > 0 ? max(0, kv_len - p.window) : 0;
  const int start = first + blockIdx.x * part_len;
  if (start >= kv_len) return;
  const int n = min(part_len, kv_len - start);

  const int Hq = p.num_q_heads, Hkv = p.num_kv_heads, G = Hq / Hkv;
  const int gchunks = (G + NG - 1) / NG;
  const int kvh = blockIdx.y / gchunks, gc = blockIdx.y % gchunks;
  const int h0 = kvh * G + gc * NG;
  const int ng = min(NG, G - gc * NG);
  const int64_t ld = int64_t(Hq + 2 * Hkv) * D;

  const T* q = static_cast<const T*>(p.qkv) + int64_t(q0) * ld + int64_t(h0) * D;
  const float qscale = p.scale * kLog2e;  // scores in log2 units: exp2 later
  for (int k = tid; k < NG * D; k += kThreads) {
    const int g = k / D;
    q_s[g][k % D] = g < ng ? to_f32(q[k]) * qscale : 0.f;
  }
  const int32_t* bt = p.block_table + int64_t(s) * p.max_blocks_per_seq;
  const int B = p.block_size;
  for (int j = tid; j < n; j += kThreads) {
    const int pos = start + j;
    slot_s[j] = bt[pos / B] * B + pos % B;
  }
  __syncthreads();

  float* scores = smem;
  const float k_fp8 = S == KvStorage::Fp8 ? p.k_scale[kvh] : 0.f;
  const float v_fp8 = S == KvStorage::Fp8 ? p.v_scale[kvh] : 0.f;
  // Exact rows (fp8 caches that keep them): the token's own block, from `ex.first` on.
  constexpr bool kExact = S == KvStorage::Fp8;
  ExactRows ex;
  if constexpr (kExact) ex = exact_rows_of(p, s, kv_len - 1);

  // Phase 1: Q K^T. kTPK neighbouring threads share a key, thread `sub` reading the 16-byte vectors
  // sub, sub + kTPK, ... of its row (so each load instruction reads whole 64-byte runs); the partial
  // dot products are summed with two shuffles. Two keys per thread per pass. The pass loop is
  // uniform over the block so that every lane reaches the shuffles.
  {
    constexpr int VPT = D / 8 / kTPK;  // vectors per thread per key
    const int sub = tid % kTPK, kq = tid / kTPK;
    for (int base = 0; base < n; base += 2 * kKeysPerPass) {
      KvRaw8 kr[2][VPT];
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        // keys past n read key n-1 (their scores are not stored): unconditional loads
        const int j = min(base + u * kKeysPerPass + kq, n - 1);
        const int64_t krow = int64_t(slot_s[j]) * Hkv + kvh;
        const T* erow = kExact && start + j >= ex.first ? exact_row<T>(p, ex, start + j, kvh, false) : nullptr;
#pragma unroll
        for (int v = 0; v < VPT; ++v)
          kr[u][v] = erow ? kv_load8_exact(erow, (sub + kTPK * v) * 8)
                          : kv_load8<T, S>(p.k_cache, p.k_scale, krow, D, (sub + kTPK * v) * 8);
      }
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        float acc[NG];
#pragma unroll
        for (int g = 0; g < NG; ++g) acc[g] = 0.f;
#pragma unroll
        for (int v = 0; v < VPT; ++v) {
          const uint4 kvals = kv_values8<T, S>(kr[u][v], k_fp8);
          const T* kh = reinterpret_cast<const T*>(&kvals);
          const int d0 = (sub + kTPK * v) * 8;
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            const float kf = to_f32(kh[e]);
#pragma unroll
            for (int g = 0; g < NG; ++g) acc[g] = fmaf(q_s[g][d0 + e], kf, acc[g]);
          }
        }
#pragma unroll
        for (int g = 0; g < NG; ++g) {
          acc[g] += __shfl_xor_sync(0xffffffffu, acc[g], 1);
          acc[g] += __shfl_xor_sync(0xffffffffu, acc[g], 2);
        }
        const int j = base + u * kKeysPerPass + kq;
        if (sub == 0 && j < n) {
#pragma unroll
          for (int g = 0; g < NG; ++g)
            if (g < ng) scores[g * part_len + j] = p.softcap > 0.f ? softcap_log2(acc[g], p.softcap) : acc[g];
        }
      }
    }
  }
  __syncthreads();

  // Phase 2: softmax inside the partition, one warp per head.
  const int warp = tid >> 5, lane = tid & 31;
  for (int g = warp; g < ng; g += kThreads / 32) {
    float* sc = scores + g * part_len;
    float m = -INFINITY;
    for (int j = lane; j < n; j += 32) m = fmaxf(m, sc[j]);
    m = warp_max(m);
    float l = 0.f;
    for (int j = lane; j < n; j += 32) {
      const float e = exp2f(sc[j] - m);
      sc[j] = e;
      l += e;
    }
    l = warp_sum(l);
    if (lane == 0) {
      m_s[g] = m;
      l_s[g] = l;
    }
  }
  __syncthreads();

  // Phase 3: P V. TPR threads cover one value row (8 elements each), R rows in flight, four rows per
  // thread loaded before they are used.
  constexpr int TPR = D / 8, R = kThreads / TPR, kRowsAhead = 4;
  const int r = tid / TPR, c = (tid % TPR) * 8;
  float acc[NG][8];
#pragma unroll
  for (int g = 0; g < NG; ++g)
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[g][e] = 0.f;
  for (int j0 = r; j0 < n; j0 += R * kRowsAhead) {
    KvRaw8 vr[kRowsAhead];
#pragma unroll
    for (int u = 0; u < kRowsAhead; ++u) {  // rows past n read row n-1 and are skipped below
      const int j = min(j0 + u * R, n - 1);
      vr[u] = kExact && start + j >= ex.first ? kv_load8_exact(exact_row<T>(p, ex, start + j, kvh, true), c)
                                    : kv_load8<T, S>(p.v_cache, p.v_scale, int64_t(slot_s[j]) * Hkv + kvh, D, c);
    }
#pragma unroll
    for (int u = 0; u < kRowsAhead; ++u) {
      const int j = j0 + u * R;
      if (j >= n) break;
      const uint4 vvals = kv_values8<T, S>(vr[u], v_fp8);
      const T* vh = reinterpret_cast<const T*>(&vvals);
#pragma unroll
      for (int g = 0; g < NG; ++g) {
        const float pg = g < ng ? scores[g * part_len + j] : 0.f;
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[g][e] = fmaf(pg, to_f32(vh[e]), acc[g][e]);
      }
    }
  }
  __syncthreads();  // scores are dead: reuse the buffer for the cross-row sum
  float* red = smem;
#pragma unroll
  for (int g = 0; g < NG; ++g)
#pragma unroll
    for (int e = 0; e < 8; ++e) red[(r * NG + g) * D + c + e] = acc[g][e];
  __syncthreads();

  // One partition for this row: the output as is. Several: partials to the workspace; the row's
  // last block to finish (counted in split_counters) merges them, so no second kernel is needed.
  const int row_parts = (kv_len - first + part_len - 1) / part_len;
  const int rows = decode_rows(p);
  float* ws_m = p.workspace + int64_t(rows) * Hq * num_parts * D;
  float* ws_l = ws_m + int64_t(rows) * Hq * num_parts;
  T* out = static_cast<T*>(p.out) + int64_t(q0) * Hq * D + int64_t(h0) * D;
  for (int k = tid; k < ng * D; k += kThreads) {
    const int g = k / D, d = k % D;
    float sum = 0.f;
#pragma unroll
    for (int rr = 0; rr < R; ++rr) sum += red[(rr * NG + g) * D + d];
    const float o = sum / l_s[g];
    if (row_parts == 1) {
      out[k] = from_f32<T>(o);
    } else {
      p.workspace[((int64_t(row) * Hq + h0 + g) * num_parts + blockIdx.x) * D + d] = o;
    }
  }
  if (row_parts == 1) return;
  if (tid < ng) {
    const int64_t i = (int64_t(row) * Hq + h0 + tid) * num_parts + blockIdx.x;
    ws_m[i] = m_s[tid];
    ws_l[i] = l_s[tid];
  }
  __threadfence();  // this block's partials are visible device-wide before it is counted
  __syncthreads();
  __shared__ bool last;
  int* counter = p.split_counters + int64_t(row) * gridDim.y + blockIdx.y;
  if (tid == 0) last = atomicAdd(counter, 1) == row_parts - 1;
  __syncthreads();
  if (!last) return;

  // Merge: weight each partition's normalized output by l_i * 2^(m_i - max m). Reads go to L2
  // (__ldcg): other blocks wrote them.
  for (int k = tid; k < ng * D; k += kThreads) {
    const int g = k / D, d = k % D;
    const int64_t base = (int64_t(row) * Hq + h0 + g) * num_parts;
    float M = -INFINITY;
    for (int i = 0; i < row_parts; ++i) M = fmaxf(M, __ldcg(ws_m + base + i));
    float num = 0.f, den = 0.f;
#pragma unroll 4
    for (int i = 0; i < row_parts; ++i) {
      const float w = __ldcg(ws_l + base + i) * exp2f(__ldcg(ws_m + base + i) - M);
      den += w;
      num += w * __ldcg(p.workspace + (base + i) * D + d);
    }
    out[k] = from_f32<T>(num / den);
  }
  if (tid == 0) *counter = 0;  // ready for the next launch
}

template <class T, int D, int NG, KvStorage S>
void launch_decode_ng(const AttentionParams& p, const DecodeSplit& sp, cudaStream_t stream) {
  const int G = p.num_q_heads / p.num_kv_heads;
  const int gchunks = (G + NG - 1) / NG;
  const dim3 grid(unsigned(sp.num_partitions), unsigned(p.num_kv_heads * gchunks), unsigned(decode_rows(p)));
  const size_t smem = size_t(NG) * size_t(std::max(sp.partition_len, kThreads * 8)) * sizeof(float);
  decode_kernel<T, D, NG, S><<<grid, kThreads, smem, stream>>>(p, sp.partition_len, sp.num_partitions);
  CUDA_CHECK_LAUNCH();
}

template <class T, int D, KvStorage S>
void launch_decode_d(const AttentionParams& p, const DecodeSplit& sp, cudaStream_t stream) {
  switch (ng_of(p.num_q_heads / p.num_kv_heads)) {
    case 1: launch_decode_ng<T, D, 1, S>(p, sp, stream); break;
    case 4: launch_decode_ng<T, D, 4, S>(p, sp, stream); break;
    default: launch_decode_ng<T, D, 8, S>(p, sp, stream);
  }
}

}  // namespace

DecodeSplit plan_decode_split(const AttentionParams& p) {
  DecodeSplit sp;
  const int G = p.num_q_heads / p.num_kv_heads;
  const int ng = ng_of(G);
  const int ctx0 = std::max(p.max_context_len, 1);
  if (p.fixed_partition_len > 0) {
    sp.partition_len = p.fixed_partition_len;
    sp.num_partitions = (ctx0 + sp.partition_len - 1) / sp.partition_len;
    return sp;
  }
  const int64_t blocks = int64_t(decode_rows(p)) * p.num_kv_heads * ((G + ng - 1) / ng);
  const int64_t want = 2 * int64_t(p.num_sms);  // aim for two waves' worth of blocks
  const int64_t splits = std::max<int64_t>(1, (want + blocks - 1) / std::max<int64_t>(blocks, 1));
  const int ctx = std::max(p.max_context_len, 1);
  int64_t len = (ctx + splits - 1) / splits;
  len = (len + kTile - 1) / kTile * kTile;
  sp.partition_len = int(std::clamp<int64_t>(len, kTile, kMaxPart));
  sp.num_partitions = (ctx + sp.partition_len - 1) / sp.partition_len;
  return sp;
}

size_t attention_workspace_bytes(const AttentionParams& p) {
  if (!p.any_decode && !p.token_seq) return 0;
  const DecodeSplit sp = plan_decode_split(p);
  if (sp.num_partitions <= 1) return 0;
  return size_t(decode_rows(p)) * p.num_q_heads * sp.num_partitions * (p.head_dim + 2) * sizeof(float);
}

size_t attention_split_counters(const AttentionParams& p) {
  if (!p.any_decode && !p.token_seq) return 0;
  if (plan_decode_split(p).num_partitions <= 1) return 0;
  const int G = p.num_q_heads / p.num_kv_heads;
  return size_t(decode_rows(p)) * p.num_kv_heads * ((G + ng_of(G) - 1) / ng_of(G));
}

void launch_attention_decode(const AttentionParams& p, cudaStream_t stream) {
  const DecodeSplit sp = plan_decode_split(p);
  if (sp.num_partitions > 1) {
    KERNEL_CHECK(p.workspace && p.workspace_bytes >= attention_workspace_bytes(p))
        << "attention: workspace too small (" << p.workspace_bytes << " < " << attention_workspace_bytes(p) << ")";
    KERNEL_CHECK(p.split_counters && p.split_counters_count >= attention_split_counters(p))
        << "attention: " << p.split_counters_count << " split counters, need " << attention_split_counters(p);
  }
  LLMCTL_DISPATCH_HALF(p.dtype, T, {
    LLMCTL_DISPATCH_KV_STORAGE(p.kv_storage, S, {
      if (p.head_dim == 64)
        launch_decode_d<T, 64, S>(p, sp, stream);
      else
        launch_decode_d<T, 128, S>(p, sp, stream);
    });
  });
}

}  // namespace llmctl::cuda
