#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/elementwise.cuh"

namespace llmctl::cuda {
namespace {

constexpr int kThreads = 256;

inline unsigned grid_for(int64_t n) {
  int64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > (1 << 20)) blocks = 1 << 20;  // grid-stride loops cover the rest
  return unsigned(blocks < 1 ? 1 : blocks);
}

inline void check_float(DType t, const char* what) {
  KERNEL_CHECK(t == DType::F32 || t == DType::F16 || t == DType::BF16)
      << what << ": unsupported dtype " << dtype_name(t);
}

template <class T>
__global__ void embed_kernel(EmbedParams p) {
  const int64_t t = blockIdx.x;
  const int64_t id = int64_t(p.ids[t]) - p.vocab_begin;
  T* out = static_cast<T*>(p.out) + t * p.hidden;
  const bool ok = id >= 0 && id < p.vocab;
  for (int64_t i = threadIdx.x; i < p.hidden; i += blockDim.x)
    out[i] = from_f32<T>(ok ? load_dt(p.table, int(p.table_dtype), int64_t(id) * p.hidden + i) : 0.f);
}

// out[t, i] = act(gate) * up for the two halves of a gate_up row; Act: a functor of f32.
template <class T, class Act>
__global__ void gated_mul_kernel(SiluMulParams p, Act act) {
  const T* gu = static_cast<const T*>(p.gate_up);
  T* out = static_cast<T*>(p.out);
  const int64_t n = p.num_tokens * p.inter;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = k / p.inter, i = k % p.inter;
    const float g = to_f32(gu[t * 2 * p.inter + i]);
    const float u = to_f32(gu[t * 2 * p.inter + p.inter + i]);
    out[k] = from_f32<T>(act(g) * u);
  }
}

struct Silu {
  __device__ float operator()(float g) const { return g / (1.f + __expf(-g)); }
};
struct GeluTanh {  // PyTorch's gelu(approximate="tanh")
  __device__ float operator()(float g) const {
    return 0.5f * g * (1.f + tanhf(0.7978845608028654f * (g + 0.044715f * g * g * g)));
  }
};

template <class T>
__global__ void scale_kernel(T* x, int64_t n, float s) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x)
    x[k] = from_f32<T>(to_f32(x[k]) * s);
}

template <class T>
__global__ void soft_cap_kernel(T* x, int64_t n, float cap) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x)
    x[k] = from_f32<T>(cap * tanhf(to_f32(x[k]) / cap));
}

__global__ void gather_rows_kernel(GatherRowsParams p) {
  const int64_t r = blockIdx.x;
  const int64_t src = p.rows[r];
  for (int64_t c = threadIdx.x; c < p.cols; c += blockDim.x)
    store_dt(p.out, int(p.out_dtype), r * p.cols + c, load_dt(p.x, int(p.x_dtype), src * p.cols + c));
}

template <class T>
__global__ void bias_add_kernel(BiasAddParams p) {
  T* out = static_cast<T*>(p.out);
  const int64_t n = p.rows * p.cols;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x)
    out[k] = from_f32<T>(to_f32(out[k]) + load_dt(p.bias, int(p.bias_dtype), k % p.cols));
}

__global__ void convert_kernel(const void* src, int sdt, void* dst, int ddt, int64_t n) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x)
    store_dt(dst, ddt, k, load_dt(src, sdt, k));
}

__device__ __forceinline__ uint64_t mix64(uint64_t x) {  // splitmix64 finalizer
  x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27; x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__global__ void fill_random_kernel(void* dst, int dt, int64_t n, uint64_t seed, float scale) {
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < n; k += int64_t(gridDim.x) * blockDim.x) {
    const uint64_t h = mix64(seed * 0x9e3779b97f4a7c15ull + uint64_t(k));
    const float u = float(h >> 40) * (1.f / 16777216.f);  // [0,1)
    store_dt(dst, dt, k, (2.f * u - 1.f) * scale);
  }
}

}  // namespace

void launch_embed(const EmbedParams& p, cudaStream_t stream) {
  check_float(p.table_dtype, "embed table");
  if (p.num_tokens == 0) return;
  KERNEL_CHECK(p.num_tokens < (int64_t(1) << 31)) << "embed: too many tokens";
  LLMCTL_DISPATCH_FLOAT(p.dtype, T, embed_kernel<T><<<unsigned(p.num_tokens), kThreads, 0, stream>>>(p));
  CUDA_CHECK_LAUNCH();
}

void launch_silu_mul(const SiluMulParams& p, cudaStream_t stream) {
  if (p.num_tokens * p.inter == 0) return;
  LLMCTL_DISPATCH_FLOAT(p.dtype, T,
                        gated_mul_kernel<T, Silu><<<grid_for(p.num_tokens * p.inter), kThreads, 0, stream>>>(p, Silu{}));
  CUDA_CHECK_LAUNCH();
}

void launch_gelu_tanh_mul(const SiluMulParams& p, cudaStream_t stream) {
  if (p.num_tokens * p.inter == 0) return;
  LLMCTL_DISPATCH_FLOAT(p.dtype, T,
                        gated_mul_kernel<T, GeluTanh><<<grid_for(p.num_tokens * p.inter), kThreads, 0, stream>>>(p, GeluTanh{}));
  CUDA_CHECK_LAUNCH();
}

void launch_scale(void* x, DType dtype, int64_t n, float s, cudaStream_t stream) {
  if (n == 0) return;
  LLMCTL_DISPATCH_FLOAT(dtype, T, scale_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<T*>(x), n, s));
  CUDA_CHECK_LAUNCH();
}

void launch_soft_cap(void* x, DType dtype, int64_t n, float cap, cudaStream_t stream) {
  if (n == 0) return;
  LLMCTL_DISPATCH_FLOAT(dtype, T,
                        soft_cap_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<T*>(x), n, cap));
  CUDA_CHECK_LAUNCH();
}

void launch_gather_rows(const GatherRowsParams& p, cudaStream_t stream) {
  check_float(p.x_dtype, "gather_rows x");
  check_float(p.out_dtype, "gather_rows out");
  if (p.num_rows == 0) return;
  gather_rows_kernel<<<unsigned(p.num_rows), kThreads, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH();
}

void launch_bias_add(const BiasAddParams& p, cudaStream_t stream) {
  check_float(p.bias_dtype, "bias");
  if (p.rows * p.cols == 0) return;
  LLMCTL_DISPATCH_FLOAT(p.dtype, T, bias_add_kernel<T><<<grid_for(p.rows * p.cols), kThreads, 0, stream>>>(p));
  CUDA_CHECK_LAUNCH();
}

void launch_convert(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n, cudaStream_t stream) {
  check_float(src_dtype, "convert source");
  check_float(dst_dtype, "convert target");
  if (n == 0) return;
  convert_kernel<<<grid_for(n), kThreads, 0, stream>>>(src, int(src_dtype), dst, int(dst_dtype), n);
  CUDA_CHECK_LAUNCH();
}

void launch_fill_random(void* dst, DType dtype, int64_t n, uint64_t seed, float scale, cudaStream_t stream) {
  check_float(dtype, "fill_random");
  if (n == 0) return;
  fill_random_kernel<<<grid_for(n), kThreads, 0, stream>>>(dst, int(dtype), n, seed, scale);
  CUDA_CHECK_LAUNCH();
}

}  // namespace llmctl::cuda
