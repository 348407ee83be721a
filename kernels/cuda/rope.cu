#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/rope.cuh"

namespace llmctl::cuda {
namespace {

// One block per token; threads loop over (head, i) pairs of the q and k heads. A thread owning a
// k pair also copies the matching v pair, so every cache element of the token is written once.
template <class T>
__global__ void rope_write_kv_kernel(RopeKvParams p) {
  const int64_t t = blockIdx.x;
  const int D = p.head_dim, half = D / 2, Hq = p.num_q_heads, Hkv = p.num_kv_heads;
  const int rhalf = (p.rotary_dim > 0 ? p.rotary_dim : D) / 2;  // pairs that turn
  T* row = static_cast<T*>(p.qkv) + t * int64_t(Hq + 2 * Hkv) * D;
  const float pos = p.do_rope ? float(p.positions[t]) : 0.f;
  const int64_t slot = p.do_write ? p.slot_mapping[t] : -1;
  const bool long_freq = p.do_rope && p.long_from > 0 && p.positions[t] >= p.long_from;  // LongRoPE
  const int npairs = (Hq + Hkv) * half;
  for (int k = threadIdx.x; k < npairs; k += blockDim.x) {
    const int h = k / half, i = k % half;
    // The head's two elements this thread owns: a turning pair (i, i + R/2), or past it two
    // neighbours of the part that passes through (partial rotary).
    const int e1 = i < rhalf ? i : 2 * rhalf + 2 * (i - rhalf), e2 = i < rhalf ? i + rhalf : e1 + 1;
    T* a = row + h * D;
    if (p.do_rope && i < rhalf) {
      const float x1 = to_f32(a[e1]), x2 = to_f32(a[e2]);
      float s, c;
      sincosf(pos * (long_freq ? p.inv_freq_long[i] : p.inv_freq[i]), &s, &c);
      c *= p.attention_scaling, s *= p.attention_scaling;
      a[e1] = from_f32<T>(x1 * c - x2 * s);
      a[e2] = from_f32<T>(x2 * c + x1 * s);
    }
    if (h >= Hq && slot >= 0) {  // k head: the cache gets the (rotated, rounded) values, v's as they are
      T* kc = static_cast<T*>(p.k_cache) + (slot * Hkv + (h - Hq)) * D;
      kc[e1] = a[e1];
      kc[e2] = a[e2];
      const T* v = row + (Hkv + h) * D;  // v head (h - Hq) sits Hkv heads after k head (h - Hq)
      T* vc = static_cast<T*>(p.v_cache) + (slot * Hkv + (h - Hq)) * D;
      vc[e1] = v[e1];
      vc[e2] = v[e2];
    }
  }
}

}  // namespace

void launch_rope_write_kv(const RopeKvParams& p, cudaStream_t stream) {
  KERNEL_CHECK(p.head_dim % 2 == 0 && p.head_dim / 2 <= kMaxRopeHalf) << "rope: head_dim " << p.head_dim;
  KERNEL_CHECK(p.rotary_dim % 2 == 0 && p.rotary_dim >= 0 && p.rotary_dim <= p.head_dim)
      << "rope: rotary_dim " << p.rotary_dim << " for head_dim " << p.head_dim;
  KERNEL_CHECK(p.num_q_heads > 0 && p.num_kv_heads > 0) << "rope: head counts";
  KERNEL_CHECK(!p.do_rope || p.positions) << "rope: positions missing";
  KERNEL_CHECK(!p.do_write || (p.slot_mapping && p.k_cache && p.v_cache)) << "write_kv: cache or slots missing";
  if (p.num_tokens == 0 || (!p.do_rope && !p.do_write)) return;
  KERNEL_CHECK(p.num_tokens < (int64_t(1) << 31)) << "rope: too many tokens";
  LLMCTL_DISPATCH_FLOAT(p.dtype, T, rope_write_kv_kernel<T><<<unsigned(p.num_tokens), 256, 0, stream>>>(p));
  CUDA_CHECK_LAUNCH();
}

}  // namespace llmctl::cuda
