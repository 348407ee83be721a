// Tiled varlen prefill attention over the paged cache (flash-attention style, wmma tensor cores).
#include <mma.h>

#include <cmath>

#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/attention_internal.cuh"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/kv_codes.cuh"

namespace llmctl::cuda {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kThreads = 128;  // 4 warps, each owns 16 query rows
constexpr int BM = 64, BN = 64;
constexpr float kLog2e = 1.4426950408889634f;

// Shared-memory layout for head dim D. Row paddings keep wmma pointers 32-byte aligned (every
// region size and 16-row offset is a multiple of 32 bytes) and spread banks.
template <int D>
struct Smem {
  static constexpr int LDQ = D + 8;   // Q, K, V tiles (16-bit)
  static constexpr int LDS = BN + 4;  // scores (f32)
  static constexpr int LDP = BN + 8;  // probabilities (16-bit)
  static constexpr int LDO = D + 4;   // output accumulator (f32)
  static constexpr size_t q = size_t(BM) * LDQ * 2, kv = size_t(BN) * LDQ * 2;
  static constexpr size_t sc = size_t(BM) * LDS * 4, pr = size_t(BM) * LDP * 2, o = size_t(BM) * LDO * 4;
  static constexpr size_t stats = size_t(BM) * 4 * 3;  // m, l, query positions
  static constexpr size_t bytes = q + 2 * kv + sc + pr + o + stats;
};

// Block (query tile, q head, sequence). Rows are the sequence's new tokens [m0, m0 + 64); keys are
// cache positions [0, max position in the tile]; key j is masked for a row at position p when j > p.
// S: what the cache stores (kv_codes.cuh reads it into the 16-bit K and V tiles).
template <class T, int D, KvStorage S>
__global__ void __launch_bounds__(kThreads) prefill_kernel(AttentionParams p) {
  using L = Smem<D>;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* Q_s = reinterpret_cast<T*>(smem_raw);
  T* K_s = reinterpret_cast<T*>(smem_raw + L::q);
  T* V_s = reinterpret_cast<T*>(smem_raw + L::q + L::kv);
  float* S_s = reinterpret_cast<float*>(smem_raw + L::q + 2 * L::kv);
  T* P_s = reinterpret_cast<T*>(smem_raw + L::q + 2 * L::kv + L::sc);
  float* O_s = reinterpret_cast<float*>(smem_raw + L::q + 2 * L::kv + L::sc + L::pr);
  float* m_s = reinterpret_cast<float*>(smem_raw + L::q + 2 * L::kv + L::sc + L::pr + L::o);
  float* l_s = m_s + BM;
  int* qpos_s = reinterpret_cast<int*>(l_s + BM);

  const int s = blockIdx.z;
  const int q0 = p.query_start[s];
  const int qlen = p.query_start[s + 1] - q0;
  if (qlen < 2) return;  // single-token sequences use the decode kernel
  const int m0 = blockIdx.x * BM;
  if (m0 >= qlen) return;
  const int rows = min(BM, qlen - m0);
  const int Hq = p.num_q_heads, Hkv = p.num_kv_heads;
  const int h = blockIdx.y, kvh = h / (Hq / Hkv);
  const int64_t ld = int64_t(Hq + 2 * Hkv) * D;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  constexpr int VPR = D / 8;  // 16-byte vectors per row

  // Rows past the end repeat the last row's position so their softmax stays finite (never stored).
  for (int r = tid; r < BM; r += kThreads) {
    qpos_s[r] = p.positions[q0 + m0 + min(r, rows - 1)];
    m_s[r] = -INFINITY;
    l_s[r] = 0.f;
  }
  const T* qbase = static_cast<const T*>(p.qkv) + int64_t(q0 + m0) * ld + int64_t(h) * D;
  for (int k = tid; k < BM * VPR; k += kThreads) {
    const int r = k / VPR, c = (k % VPR) * 8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r < rows) v = *reinterpret_cast<const uint4*>(qbase + int64_t(r) * ld + c);
    *reinterpret_cast<uint4*>(Q_s + r * L::LDQ + c) = v;
  }
  for (int k = tid; k < BM * L::LDO; k += kThreads) O_s[k] = 0.f;
  __syncthreads();
  int kv_end = 0;
  for (int r = 0; r < BM; ++r) kv_end = max(kv_end, qpos_s[r] + 1);

  const int32_t* bt = p.block_table + int64_t(s) * p.max_blocks_per_seq;
  const int B = p.block_size;
  const float k_fp8 = S == KvStorage::Fp8 ? p.k_scale[kvh] : 0.f;
  const float v_fp8 = S == KvStorage::Fp8 ? p.v_scale[kvh] : 0.f;
  const float sl2 = p.scale * kLog2e;
  const int r0 = warp * 16;

  // A sliding window: keys before the first row's window are skipped (rows are in position order;
  // a later row's earlier keys are masked below).
  // Keys before kv_first (the first row's first key) are never read: a bounded cache has released
  // their blocks (engine/kv/kv_cache_manager.h).
  const int kv_first = p.window > 0 ? max(0, qpos_s[0] - p.window + 1) : 0;
  const int kv_begin = kv_first / BN * BN;
  for (int n0 = kv_begin; n0 < kv_end; n0 += BN) {
    // K and V tiles; keys outside [kv_first, kv_end) are zero (their probabilities are 0, and
    // 0 * garbage may be NaN).
    for (int k = tid; k < BN * VPR; k += kThreads) {
      const int j = k / VPR, c = (k % VPR) * 8, pos = n0 + j;
      uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
      if (pos >= kv_first && pos < kv_end) {
        const int64_t row = (int64_t(bt[pos / B]) * B + pos % B) * Hkv + kvh;
        kv = kv_values8<T, S>(kv_load8<T, S>(p.k_cache, p.k_scale, row, D, c), k_fp8);
        vv = kv_values8<T, S>(kv_load8<T, S>(p.v_cache, p.v_scale, row, D, c), v_fp8);
      }
      *reinterpret_cast<uint4*>(K_s + j * L::LDQ + c) = kv;
      *reinterpret_cast<uint4*>(V_s + j * L::LDQ + c) = vv;
    }
    __syncthreads();

    // S[r0:r0+16, 0:BN] = Q K^T (K_s read as a column-major D x BN matrix).
    {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[BN / 16];
#pragma unroll
      for (int c = 0; c < BN / 16; ++c) wmma::fill_fragment(acc[c], 0.f);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::load_matrix_sync(a, Q_s + r0 * L::LDQ + kk * 16, L::LDQ);
#pragma unroll
        for (int c = 0; c < BN / 16; ++c) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> b;
          wmma::load_matrix_sync(b, K_s + (c * 16) * L::LDQ + kk * 16, L::LDQ);
          wmma::mma_sync(acc[c], a, b, acc[c]);
        }
      }
#pragma unroll
      for (int c = 0; c < BN / 16; ++c)
        wmma::store_matrix_sync(S_s + r0 * L::LDS + c * 16, acc[c], L::LDS, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax on the warp's own 16 rows (lane owns columns lane and lane + 32).
    for (int rr = 0; rr < 16; ++rr) {
      const int r = r0 + rr, qp = qpos_s[r];
      float v0 = S_s[r * L::LDS + lane] * sl2, v1 = S_s[r * L::LDS + lane + 32] * sl2;
      if (p.softcap > 0.f) {  // cap * tanh(s / cap), in log2 units
        v0 = p.softcap * tanhf(v0 / (kLog2e * p.softcap)) * kLog2e;
        v1 = p.softcap * tanhf(v1 / (kLog2e * p.softcap)) * kLog2e;
      }
      const int lo = p.window > 0 ? qp - p.window : -1;  // keys <= lo are outside the window
      if (n0 + lane > qp || n0 + lane <= lo) v0 = -INFINITY;
      if (n0 + lane + 32 > qp || n0 + lane + 32 <= lo) v1 = -INFINITY;
      const float m_old = m_s[r];
      // -inf while every key so far was masked (only under a window: without one, key 0 never is);
      // the exponents then use 0, so the masked keys weigh exactly 0, never NaN.
      const float m_new = fmaxf(m_old, warp_max(fmaxf(v0, v1)));
      const float m_exp = m_new == -INFINITY ? 0.f : m_new;
      const T p0 = from_f32<T>(exp2f(v0 - m_exp)), p1 = from_f32<T>(exp2f(v1 - m_exp));
      P_s[r * L::LDP + lane] = p0;
      P_s[r * L::LDP + lane + 32] = p1;
      const float rs = warp_sum(to_f32(p0) + to_f32(p1));  // sum what P V will use
      const float alpha = exp2f(m_old - m_exp);          // 0 on the first tile
      for (int d = lane; d < D; d += 32) O_s[r * L::LDO + d] *= alpha;
      __syncwarp();
      if (lane == 0) {
        m_s[r] = m_new;
        l_s[r] = l_s[r] * alpha + rs;
      }
    }
    __syncwarp();

    // O[r0:r0+16, :] += P V
#pragma unroll
    for (int c = 0; c < D / 16; ++c) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> o;
      wmma::load_matrix_sync(o, O_s + r0 * L::LDO + c * 16, L::LDO, wmma::mem_row_major);
#pragma unroll
      for (int kk = 0; kk < BN / 16; ++kk) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b;
        wmma::load_matrix_sync(a, P_s + r0 * L::LDP + kk * 16, L::LDP);
        wmma::load_matrix_sync(b, V_s + (kk * 16) * L::LDQ + c * 16, L::LDQ);
        wmma::mma_sync(o, a, b, o);
      }
      wmma::store_matrix_sync(O_s + r0 * L::LDO + c * 16, o, L::LDO, wmma::mem_row_major);
    }
    __syncthreads();  // K_s / V_s are overwritten by the next tile
  }

  T* out = static_cast<T*>(p.out) + int64_t(q0 + m0) * Hq * D + int64_t(h) * D;
  for (int k = tid; k < rows * D; k += kThreads) {
    const int r = k / D, d = k % D;
    out[int64_t(r) * Hq * D + d] = from_f32<T>(O_s[r * L::LDO + d] / l_s[r]);
  }
}

template <class T, int D, KvStorage S>
void launch_prefill_d(const AttentionParams& p, cudaStream_t stream) {
  constexpr size_t smem = Smem<D>::bytes;
  CUDA_CHECK(cudaFuncSetAttribute(prefill_kernel<T, D, S>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const dim3 grid(unsigned((p.max_query_len + BM - 1) / BM), unsigned(p.num_q_heads), unsigned(p.num_seqs));
  prefill_kernel<T, D, S><<<grid, kThreads, smem, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_attention_prefill(const AttentionParams& p, cudaStream_t stream) {
  LLMCTL_DISPATCH_HALF(p.dtype, T, {
    LLMCTL_DISPATCH_KV_STORAGE(p.kv_storage, S, {
      if (p.head_dim == 64)
        launch_prefill_d<T, 64, S>(p, stream);
      else
        launch_prefill_d<T, 128, S>(p, stream);
    });
  });
}

}  // namespace llmctl::cuda
