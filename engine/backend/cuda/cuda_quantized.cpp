// CudaBackend's quantized paths:
//   - group-affine linears (Int4Group / Int8Group): upload_quantized packs the loader's canonical
//     codes into kernels/cuda/qlinear.cuh's layout and uploads codes, scales and offsets as they are;
//     linear_quantized runs kernels/cuda/qlinear.cu (decode sizes) or qlinear_mma.cu on them;
//   - int8 / fp8 KV caches (kernels/cuda/kv_quant.cuh): write_kv quantizes, attention's kernels read
//     the codes in place (kernels/cuda/kv_codes.cuh), copy_blocks moves int8's scales.
// Verified on an H200 (scripts/gpu-check.sh: tests/gpu/test_cuda_qlinear.cpp, test_cuda_kv_quant.cpp,
// the golden model's perplexity with quantized weights equal to its dense copy's). Whether a
// checkpoint's linears reach them is --quantized-weights' choice (engine/runtime.h).
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/core/error.h"
#include "kernels/cuda/kv_quant.cuh"
#include "kernels/cuda/qlinear.cuh"

namespace llmctl {
namespace {

// A weight without offsets carries a default Tensor (no data, shape [] whose numel is 1).
bool has_offsets(const Tensor& zeros) { return !zeros.empty() && zeros.numel() > 0; }

}  // namespace

LinearWeight CudaBackend::upload_quantized(const LinearWeight& c) {
  require_support(c.format);
  const int bits = c.format == WeightFormat::Int4Group ? 4 : 8;
  const int64_t N = c.n, K = c.k;
  LLM_CHECK(N > 0 && int_group_shape_ok(K, c.group_size))
      << "upload_quantized: [N, K] = [" << N << ", " << K << "] in groups of " << c.group_size << " (" << kIntGroupRule << ")";
  LLM_CHECK(c.data.device == Device::CPU && (c.data.dtype == DType::U8 || c.data.dtype == DType::I8) &&
            c.data.numel() == N * K)
      << "upload_quantized: codes must be host U8 [" << N << ", " << K << "], got " << dtype_name(c.data.dtype)
      << c.data.shape_str();
  const int64_t G = K / c.group_size;
  LLM_CHECK((c.scales.dtype == DType::F16 || c.scales.dtype == DType::F32) && c.scales.numel() == N * G)
      << "upload_quantized: scales " << dtype_name(c.scales.dtype) << c.scales.shape_str() << ", want [" << N
      << ", " << G << "] f16/f32";
  LLM_CHECK(!has_offsets(c.zeros) || (c.zeros.dtype == c.scales.dtype && c.zeros.numel() == N * G))
      << "upload_quantized: offsets " << dtype_name(c.zeros.dtype) << c.zeros.shape_str() << " vs scales "
      << dtype_name(c.scales.dtype) << c.scales.shape_str();
  const uint8_t* codes = static_cast<const uint8_t*>(c.data.data);
  if (bits == 4) {
    for (int64_t i = 0; i < N * K; ++i) {
      LLM_CHECK(codes[i] <= 15) << "upload_quantized: 4-bit code " << int(codes[i]) << " at " << i;
    }
  }

  const int64_t row_bytes = cuda::qlinear_row_bytes(bits, K);
  Tensor packed = Tensor::empty_host(DType::U8, {N, row_bytes});
  cuda::qlinear_pack(bits, N, K, codes, static_cast<uint8_t*>(packed.data));
  LinearWeight w;
  w.format = c.format;
  w.n = N;
  w.k = K;
  w.group_size = c.group_size;
  w.shard = c.shard;
  w.data = upload(packed, DType::U8);
  w.scales = upload(c.scales, c.scales.dtype);
  if (has_offsets(c.zeros)) w.zeros = upload(c.zeros, c.zeros.dtype);
  check_input_perm(c);
  if (!c.input_perm.empty()) w.input_perm = upload(c.input_perm, DType::I32);
  return w;
}

cuda::QLinearParams CudaBackend::qlinear_params(const Tensor& x, const LinearWeight& w, const Tensor* bias,
                                               Tensor& out) {
  require_support(w.format);
  check_device(x, "linear_quantized x");
  check_device(w.data, "linear_quantized codes");
  check_device(w.scales, "linear_quantized scales");
  check_device(out, "linear_quantized out");
  const int64_t K = x.dim(-1), T = x.numel() / std::max<int64_t>(K, 1), N = w.n;
  LLM_CHECK(K == w.k) << "linear_quantized: x " << x.shape_str() << " vs weight [" << w.n << ", " << w.k << "]";
  LLM_CHECK(out.numel() == T * N && out.dim(-1) == N)
      << "linear_quantized: out " << out.shape_str() << ", want [" << T << ", " << N << "]";
  cuda::QLinearParams p;
  p.x = x.data;
  p.x_dtype = x.dtype;
  p.packed = static_cast<const uint8_t*>(w.data.data);
  p.bits = w.format == WeightFormat::Int4Group ? 4 : 8;
  p.group = w.group_size;
  p.scale = w.scales.data;
  p.scale_dtype = w.scales.dtype;
  if (has_offsets(w.zeros)) {
    check_device(w.zeros, "linear_quantized offsets");
    p.offset = w.zeros.data;
  }
  if (bias) {
    check_device(*bias, "linear_quantized bias");
    LLM_CHECK(bias->numel() == N) << "linear_quantized: bias " << bias->shape_str() << " for N=" << N;
    p.bias = bias->data;
    p.bias_dtype = bias->dtype;
  }
  p.out = out.data;
  p.out_dtype = out.dtype;
  p.T = T;
  p.N = N;
  p.K = K;
  return p;
}

bool CudaBackend::runs_cuda_core_qlinear(const LinearWeight& w, int64_t T) const {
  // linear_quantized's rule below: the tuner, too, runs the CUDA-core kernel up to kQLinearSmallT
  // tokens (qlinear_tuner.h); act-order weights gather their input first.
  return !options_.deterministic && T <= cuda::kQLinearSmallT && w.input_perm.empty() && !is_dense(w.format);
}

void CudaBackend::linear_quantized(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& out) {
  cuda::QLinearParams p = qlinear_params(x, w, bias, out);
  const int64_t T = p.T, K = p.K;
  if (T == 0 || p.N == 0) return;  // nothing to compute (and no scratch to gather an empty x into)
  if (!w.input_perm.empty()) {  // act-order: the kernels read x[:, input_perm] (gathered into scratch)
    check_device(w.input_perm, "linear_quantized input_perm");
    void* xp = grow(perm_scratch_, perm_scratch_bytes_, size_t(T * K) * dtype_size(x.dtype));
    cuda::qlinear_gather_columns(x.data, x.dtype, w.input_perm.ptr<int32_t>(), T, K, xp, stream_);
    p.x = xp;
  }
  // Under --deterministic tensor cores for every T (batch invariant: a row's bits do not depend on
  // T), as the dense path's gemm_invariant. Otherwise CUDA cores up to decode sizes, and past them
  // the faster kernel per shape as measured (qlinear_tuner.h; tensor cores without autotune).
  // f32 activations: CUDA cores.
  if (options_.autotune && !options_.deterministic)
    qtuner_.run(p, stream_);
  else if (cuda::qlinear_mma_fits(p) && (options_.deterministic || T > cuda::kQLinearSmallT))
    cuda::qlinear_mma(p, stream_);
  else
    cuda::qlinear(p, stream_);
}

void CudaBackend::check_quant_cache(const KvLayer& c, int hkv) const {
  LLM_REQUIRE(caps_.supports_kv_cache(c.quant)) << "backend " << name() << " has no " << kv_cache_dtype_name(c.quant)
                                          << " KV cache";
  const bool int8 = c.quant == KvCacheDtype::Int8;
  LLM_CHECK(c.k.rank() == 4 && c.k.shape == c.v.shape && c.k.dim(2) == hkv)
      << "kv cache " << c.k.shape_str() << " with " << hkv << " kv heads";
  LLM_CHECK(c.k.dtype == (int8 ? DType::I8 : DType::U8) && c.v.dtype == c.k.dtype)
      << "a " << kv_cache_dtype_name(c.quant) << " kv cache of " << dtype_name(c.k.dtype);
  const int64_t want = int8 ? c.k.numel() / c.k.dim(3) * 2 : hkv;
  LLM_CHECK(c.k_scale.dtype == DType::F32 && c.v_scale.dtype == DType::F32 && c.k_scale.numel() == want &&
            c.v_scale.numel() == want)
      << "kv cache scales " << dtype_name(c.k_scale.dtype) << c.k_scale.shape_str() << ", want " << want << " f32";
}

void CudaBackend::write_kv_quant(const Tensor& qkv, const DeviceBatch& b, int hq, int hkv, KvLayer& cache) {
  check_quant_cache(cache, hkv);
  const int D = int(cache.k.dim(3));
  LLM_CHECK(qkv.dim(-1) == int64_t(hq + 2 * hkv) * D) << "write_kv: qkv " << qkv.shape_str();
  cuda::KvQuantWriteParams p;
  p.kind = cache.quant == KvCacheDtype::Int8 ? cuda::KvQuantKind::Int8 : cuda::KvQuantKind::Fp8;
  p.qkv = qkv.data;
  p.dtype = qkv.dtype;
  p.slot_mapping = b.slot_mapping.ptr<int32_t>();
  p.k = cache.k.data;
  p.v = cache.v.data;
  p.k_scale = cache.k_scale.ptr<float>();
  p.v_scale = cache.v_scale.ptr<float>();
  p.num_tokens = b.slot_mapping.numel();
  p.num_q_heads = hq;
  p.num_kv_heads = hkv;
  p.head_dim = D;
  cuda::launch_kv_quant_write(p, stream_);
}

}  // namespace llmctl
