#include "engine/backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>

#include "engine/core/error.h"
#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/gemm.cuh"
#include "kernels/cuda/norm.cuh"
#include "kernels/cuda/rope.cuh"

namespace llmctl {
namespace {

constexpr size_t kCublasWorkspace = size_t(32) << 20;

bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

int64_t rows_of(const Tensor& t) { return t.rank() == 0 ? 1 : t.numel() / std::max<int64_t>(t.dim(-1), 1); }

}  // namespace

int cuda_device_count() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // clear the (non-sticky) error
    return 0;
  }
  return n;
}

bool cuda_device_available() { return cuda_device_count() > 0; }

std::unique_ptr<Backend> make_cuda_backend(DType compute_dtype, int device_index, CudaOptions options) {
  return std::make_unique<CudaBackend>(compute_dtype, device_index, options);
}

CudaBackend::CudaBackend(DType compute_dtype, int device_index, CudaOptions options)
    : dtype_(compute_dtype), options_(options), device_(device_index) {
  caps_.weight_formats = {WeightFormat::DenseF32, WeightFormat::DenseF16, WeightFormat::DenseBF16,
                          WeightFormat::Int4Group, WeightFormat::Int8Group};
  caps_.input_perm = true;
  caps_.kv_dtypes = {KvCacheDtype::Auto, KvCacheDtype::Int8, KvCacheDtype::Fp8};
  caps_.kv_exact_rows = {KvCacheDtype::Fp8};
  caps_.sampling = true;
  caps_.graphs = options_.graphs;
  caps_.moe = true;  // cuda_moe.cpp
  LLM_CHECK(dtype_ == DType::BF16 || dtype_ == DType::F16) << "CUDA compute dtype must be bf16 or f16, got "
                                                           << dtype_name(dtype_);
  LLM_CHECK(cuda_device_available()) << "no CUDA device";
  CUDA_CHECK(cudaSetDevice(device_));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  num_sms_ = prop.multiProcessorCount;
  name_ = "cuda:" + std::to_string(device_) + " (" + prop.name + ", " + dtype_name(dtype_) +
          (options_.deterministic ? ", deterministic" : "") + ")";
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&pinned_free_, cudaEventDisableTiming));
  CUBLAS_CHECK(cuda::cublas_api().cublasCreate(&cublas_));
  CUBLAS_CHECK(cuda::cublas_api().cublasSetStream(cublas_, stream_));
  CUDA_CHECK(cudaMalloc(&cublas_ws_, kCublasWorkspace));
  CUBLAS_CHECK(cuda::cublas_api().cublasSetWorkspace(cublas_, cublas_ws_, kCublasWorkspace));
  if (options_.autotune) {  // one cache file per GPU model and cuBLASLt version ("2": entries may name the GEMV)
    std::string file;
    if (!options_.autotune_dir.empty()) {
      std::string gpu = prop.name;
      for (char& ch : gpu)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '-';
      file = options_.autotune_dir + "/gemm-autotune2-" + gpu + "-sm" + std::to_string(prop.major * 10 + prop.minor) +
             "-cublaslt" + std::to_string(cuda::cublas_api().cublasLtGetVersion()) + ".txt";
    }
    tuner_ = std::make_unique<cuda::GemmTuner>(cublas_ws_, kCublasWorkspace, file);
  }
}

CudaBackend::~CudaBackend() {
  // No throwing from a destructor: errors here are ignored.
  if (stream_) cudaStreamSynchronize(stream_);
  for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
  for (void* p : {batch_dev_, sample_dev_, sample_scratch_, perm_scratch_, moe_dev_, group_dev_})
    if (p) cudaFree(p);
  if (sample_pinned_) cudaFreeHost(sample_pinned_);
  tuner_.reset();
  if (step_begin_) cudaEventDestroy(step_begin_);
  if (step_end_) cudaEventDestroy(step_end_);
  if (cublas_) cuda::cublas_api().cublasDestroy(cublas_);
  if (cublas_ws_) cudaFree(cublas_ws_);
  if (attn_ws_) cudaFree(attn_ws_);
  if (attn_counters_) cudaFree(attn_counters_);
  if (pinned_) cudaFreeHost(pinned_);
  if (pinned_free_) cudaEventDestroy(pinned_free_);
  if (stream_) cudaStreamDestroy(stream_);
}

void CudaBackend::check_device(const Tensor& t, const char* what) const {
  LLM_CHECK(t.device == Device::CUDA && (t.data || t.numel() == 0))
      << what << ": expected a CUDA tensor, got " << (t.device == Device::CUDA ? "an empty one" : "a host tensor");
}

void CudaBackend::synchronize() { CUDA_CHECK(cudaStreamSynchronize(stream_)); }

std::optional<size_t> CudaBackend::kv_cache_budget(double fraction, size_t reserve) {
  LLM_REQUIRE(fraction > 0 && fraction <= 1) << "--gpu-memory-utilization must be in (0, 1], got " << fraction;
  synchronize();
  size_t free_bytes = 0, total = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  const double used = double(total - free_bytes), allowed = fraction * double(total);
  const int share = std::max(1, options_.ranks_per_device);
  const double left = (allowed - used) / share - double(reserve);
  LLM_REQUIRE(left > 0) << "--gpu-memory-utilization " << fraction << " allows " << allowed / 1e9 << " GB of "
                        << total / 1e9 << " GB, but " << used / 1e9 << " GB are in use"
                        << (share > 1 ? " (the device is shared by " + std::to_string(share) + " ranks)" : "")
                        << " and " << reserve / 1e9 << " GB are reserved for activations: no room for the KV cache";
  return size_t(left);
}

void* CudaBackend::grow(void*& buf, size_t& cap, size_t bytes) {
  if (bytes <= cap) return buf;
  clear_graphs();
  if (buf) CUDA_CHECK(cudaFree(buf));  // waits for kernels still using it
  buf = nullptr;
  cap = 0;
  const size_t want = std::max<size_t>(bytes + bytes / 2, 4096);
  CUDA_CHECK(cudaMalloc(&buf, want));
  cap = want;
  return buf;
}

Tensor CudaBackend::alloc(DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.device = Device::CUDA;
  for (int64_t d : t.shape) LLM_CHECK(d >= 0) << "negative dimension in " << t.shape_str();
  const size_t bytes = std::max<size_t>(t.nbytes(), 16);
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, bytes);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    LLM_CHECK(false) << "cudaMalloc of " << bytes << " bytes for " << dtype_name(dtype) << t.shape_str()
                     << " failed: " << cudaGetErrorString(err);
  }
  t.data = p;
  t.owner = std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
  return t;
}

Tensor CudaBackend::upload(const Tensor& host, std::optional<DType> dtype) {
  LLM_CHECK(host.device == Device::CPU) << "upload: source must be a host tensor";
  const DType to = dtype ? *dtype : (is_float(host.dtype) ? dtype_ : host.dtype);
  Tensor out = alloc(to, host.shape);
  if (host.numel() == 0) return out;
  if (to == host.dtype) {
    CUDA_CHECK(cudaMemcpyAsync(out.data, host.data, host.nbytes(), cudaMemcpyHostToDevice, stream_));
  } else {
    LLM_CHECK(is_float(host.dtype) && is_float(to))
        << "upload: cannot convert " << dtype_name(host.dtype) << " to " << dtype_name(to);
    Tensor raw = alloc(host.dtype, host.shape);  // copy as stored, convert on the device
    CUDA_CHECK(cudaMemcpyAsync(raw.data, host.data, host.nbytes(), cudaMemcpyHostToDevice, stream_));
    cuda::launch_convert(raw.data, host.dtype, out.data, to, host.numel(), stream_);
    synchronize();
  }
  synchronize();
  return out;
}

void CudaBackend::copy_to_host(const Tensor& t, void* host) {
  if (t.device == Device::CPU) return Backend::copy_to_host(t, host);
  if (t.nbytes() == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(host, t.data, t.nbytes(), cudaMemcpyDeviceToHost, stream_));
  synchronize();
}

void CudaBackend::copy_from_host(const void* host, Tensor& t) {
  if (t.device == Device::CPU) return Backend::copy_from_host(host, t);
  if (t.nbytes() == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(t.data, host, t.nbytes(), cudaMemcpyHostToDevice, stream_));
  synchronize();  // the host buffer is reused by the next receive
}

Tensor CudaBackend::to_host_f32(const Tensor& t) {
  if (t.device == Device::CPU) return convert_host(t, DType::F32);
  Tensor h = Tensor::empty_host(DType::F32, t.shape);
  if (t.numel() == 0) return h;
  if (t.dtype == DType::F32) {
    CUDA_CHECK(cudaMemcpyAsync(h.data, t.data, t.nbytes(), cudaMemcpyDeviceToHost, stream_));
    synchronize();
  } else if (is_float(t.dtype)) {
    Tensor tmp = alloc(DType::F32, t.shape);
    cuda::launch_convert(t.data, t.dtype, tmp.data, DType::F32, t.numel(), stream_);
    CUDA_CHECK(cudaMemcpyAsync(h.data, tmp.data, tmp.nbytes(), cudaMemcpyDeviceToHost, stream_));
    synchronize();
  } else if (t.dtype == DType::I32) {
    Tensor hi = Tensor::empty_host(DType::I32, t.shape);
    CUDA_CHECK(cudaMemcpyAsync(hi.data, t.data, t.nbytes(), cudaMemcpyDeviceToHost, stream_));
    synchronize();
    for (int64_t i = 0; i < t.numel(); ++i) h.ptr<float>()[i] = float(hi.ptr<int32_t>()[i]);
  } else if (t.dtype == DType::I8 || t.dtype == DType::U8) {  // quantized KV codes, as numbers
    std::vector<uint8_t> raw(t.nbytes());
    CUDA_CHECK(cudaMemcpyAsync(raw.data(), t.data, raw.size(), cudaMemcpyDeviceToHost, stream_));
    synchronize();
    for (int64_t i = 0; i < t.numel(); ++i)
      h.ptr<float>()[i] = t.dtype == DType::I8 ? float(int8_t(raw[size_t(i)])) : float(raw[size_t(i)]);
  } else {
    LLM_CHECK(false) << "to_host_f32: unsupported dtype " << dtype_name(t.dtype);
  }
  return h;
}

DeviceBatch CudaBackend::prepare_batch(const BatchPlan& plan) {
  const int64_t T = plan.num_tokens(), S = plan.num_seqs();
  LLM_CHECK(int64_t(plan.positions.size()) == T && int64_t(plan.slot_mapping.size()) == T &&
            int64_t(plan.query_start.size()) == S + 1 &&
            int64_t(plan.block_table.size()) == S * plan.max_blocks_per_seq)
      << "prepare_batch: inconsistent BatchPlan sizes";
  std::vector<int32_t> token_seq(static_cast<size_t>(T));
  for (int64_t s = 0; s < S; ++s)
    for (int32_t t = plan.query_start[s]; t < plan.query_start[s + 1]; ++t) token_seq[size_t(t)] = int32_t(s);
  const std::vector<int32_t>* arrays[] = {&plan.token_ids,   &plan.positions,   &plan.slot_mapping,
                                          &plan.query_start, &plan.context_len, &plan.block_table,
                                          &plan.logits_rows, &token_seq,         &plan.exact_slot,
                                          &plan.window_slot_mapping, &plan.window_block_table};
  constexpr int kArrays = 11;
  size_t total = 0;
  for (auto* a : arrays) total += (a->size() + 3) / 4 * 4;  // each array 16-byte aligned
  const size_t bytes = std::max<size_t>(total, 4) * sizeof(int32_t);

  // The previous batch's copy must have left the staging buffer before it is overwritten.
  CUDA_CHECK(cudaEventSynchronize(pinned_free_));
  if (pinned_bytes_ < bytes) {
    if (pinned_) CUDA_CHECK(cudaFreeHost(pinned_));
    pinned_ = nullptr;
    pinned_bytes_ = 0;
    const size_t cap = std::max<size_t>(bytes * 2, 64 << 10);
    CUDA_CHECK(cudaHostAlloc(&pinned_, cap, cudaHostAllocDefault));
    pinned_bytes_ = cap;
  }
  // One device buffer at a fixed address: a graph replays reads of the same pointers, and the copy
  // below is ordered after the previous step's kernels on the stream.
  auto* dev = static_cast<int32_t*>(grow(batch_dev_, batch_dev_bytes_, bytes));
  auto* staging = static_cast<int32_t*>(pinned_);
  DeviceBatch db;
  db.plan = &plan;
  db.shape = batch_shape(plan);
  Tensor* outs[] = {&db.token_ids,   &db.positions,   &db.slot_mapping, &db.query_start, &db.context_len,
                    &db.block_table, &db.logits_rows, &db.token_seq,    &db.exact_slot,
                    &db.window_slot_mapping, &db.window_block_table};
  size_t off = 0;
  for (int i = 0; i < kArrays; ++i) {
    const int64_t n = int64_t(arrays[i]->size());
    if (n) std::memcpy(staging + off, arrays[i]->data(), size_t(n) * sizeof(int32_t));
    *outs[i] = Tensor::view(dev + off, DType::I32, {n}, nullptr);
    outs[i]->device = Device::CUDA;
    off += (size_t(n) + 3) / 4 * 4;
  }
  CUDA_CHECK(cudaMemcpyAsync(dev, pinned_, off * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaEventRecord(pinned_free_, stream_));
  db.block_table.shape = {S, plan.max_blocks_per_seq};
  db.window_block_table.shape = {S, plan.window_max_blocks_per_seq};
  return db;
}

void CudaBackend::embed(const Tensor& table, const DeviceBatch& b, Tensor& out, int64_t vocab_begin) {
  check_device(table, "embed table");
  check_device(out, "embed out");
  const int64_t T = b.token_ids.numel();
  LLM_CHECK(table.rank() == 2 && out.numel() == T * table.dim(1))
      << "embed: table " << table.shape_str() << ", out " << out.shape_str() << ", " << T << " tokens";
  cuda::launch_embed({table.data, table.dtype, b.token_ids.ptr<int32_t>(), out.data, out.dtype, T, table.dim(1),
                      table.dim(0), vocab_begin},
                     stream_);
}

void CudaBackend::rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out, Tensor* residual) {
  check_device(x, "rms_norm x");
  check_device(w, "rms_norm w");
  check_device(out, "rms_norm out");
  const int64_t H = x.dim(-1);
  LLM_CHECK(w.numel() == H && out.shape == x.shape && (out.dtype == x.dtype || x.dtype == DType::F32))
      << "rms_norm: x " << x.shape_str() << ", w " << w.shape_str() << ", out " << out.shape_str();
  cuda::RmsNormParams p{};
  p.x = x.data;
  p.out = out.data;
  p.dtype = out.dtype;
  p.x_f32 = x.dtype == DType::F32 && out.dtype != DType::F32;
  p.w = w.data;
  p.w_dtype = w.dtype;
  if (residual) {
    check_device(*residual, "rms_norm residual");
    LLM_CHECK(residual->shape == x.shape) << "rms_norm: residual " << residual->shape_str() << " vs " << x.shape_str();
    p.residual = residual->data;
    p.residual_dtype = residual->dtype;
  }
  p.rows = rows_of(x);
  p.hidden = H;
  p.eps = eps;
  cuda::launch_rms_norm(p, stream_);
}

void CudaBackend::head_rms_norm(Tensor& qkv, const Tensor& q_w, const Tensor& k_w, float eps, int hq, int hkv) {
  check_device(qkv, "head_rms_norm qkv");
  check_device(q_w, "head_rms_norm q weight");
  check_device(k_w, "head_rms_norm k weight");
  const int64_t D = q_w.numel();
  LLM_CHECK(q_w.dtype == DType::F32 && k_w.dtype == DType::F32 && k_w.numel() == D && qkv.rank() == 2 &&
            qkv.dim(1) == (hq + 2 * int64_t(hkv)) * D)
      << "head_rms_norm: qkv " << qkv.shape_str() << ", " << hq << " + " << hkv << " heads of " << D;
  cuda::launch_head_rms_norm({qkv.data, qkv.dtype, q_w.ptr<float>(), k_w.ptr<float>(), qkv.dim(0), hq, hkv, int(D), eps},
                             stream_);
}

void CudaBackend::linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out) {
  check_device(x, "linear x");
  check_device(w, "linear w");
  check_device(out, "linear out");
  const int64_t K = x.dim(-1), T = rows_of(x);
  LLM_CHECK(w.rank() == 2 && w.dim(1) == K) << "linear: x " << x.shape_str() << " vs w " << w.shape_str();
  const int64_t N = w.dim(0);
  LLM_CHECK(out.numel() == T * N && out.dim(-1) == N) << "linear: out " << out.shape_str() << ", want [" << T << ", "
                                                      << N << "]";
  LLM_CHECK(is_float(x.dtype) && is_float(w.dtype)) << "linear: float inputs only (quantized linear: not yet)";
  Tensor wconv;
  const void* wp = w.data;
  if (w.dtype != x.dtype) {  // slow path: weights should be uploaded in the compute dtype
    wconv = alloc(x.dtype, w.shape);
    cuda::launch_convert(w.data, w.dtype, wconv.data, x.dtype, w.numel(), stream_);
    wp = wconv.data;
  }
  const cuda::GemmParams gp{x.data, wp, out.data, x.dtype, out.dtype, T, N, K};
  if (options_.deterministic && x.dtype != DType::F32)
    cuda::gemm_invariant(gp, stream_);
  else if (tuner_)
    tuner_->gemm(gp, stream_);
  else
    cuda::gemm(cublas_, gp);
  if (bias) {
    check_device(*bias, "linear bias");
    LLM_CHECK(bias->numel() == N) << "linear: bias " << bias->shape_str() << " for N=" << N;
    cuda::launch_bias_add({out.data, out.dtype, bias->data, bias->dtype, T, N}, stream_);
  }
}

namespace {
cuda::RopeKvParams rope_params(Tensor& qkv, const DeviceBatch& b, int hq, int hkv, int head_dim) {
  LLM_CHECK(hq > 0 && hkv > 0 && head_dim > 0) << "rope/write_kv: bad head counts";
  LLM_CHECK(qkv.dim(-1) == int64_t(hq + 2 * hkv) * head_dim)
      << "qkv " << qkv.shape_str() << " is not [T, (" << hq << " + 2*" << hkv << ") * " << head_dim << "]";
  LLM_CHECK(rows_of(qkv) == b.positions.numel()) << "qkv rows " << rows_of(qkv) << " vs " << b.positions.numel()
                                                 << " tokens";
  cuda::RopeKvParams p{};
  p.qkv = qkv.data;
  p.dtype = qkv.dtype;
  p.positions = b.positions.ptr<int32_t>();
  p.slot_mapping = b.slot_mapping.ptr<int32_t>();
  p.num_tokens = rows_of(qkv);
  p.num_q_heads = hq;
  p.num_kv_heads = hkv;
  p.head_dim = head_dim;
  return p;
}

void set_inv_freq(cuda::RopeKvParams& p, const RopeParams& rp) {
  LLM_CHECK(rp.head_dim == p.head_dim && rp.rotary() <= rp.head_dim && int(rp.inv_freq.size()) == rp.rotary() / 2)
      << "rope: inv_freq has " << rp.inv_freq.size() << " entries for head_dim " << p.head_dim << ", rotary dim "
      << rp.rotary();
  p.rotary_dim = rp.rotary();
  LLM_CHECK(rp.head_dim / 2 <= cuda::kMaxRopeHalf) << "rope: head_dim too large";
  std::copy(rp.inv_freq.begin(), rp.inv_freq.end(), p.inv_freq);
  p.long_from = rp.long_from;
  p.attention_scaling = rp.attention_scaling;
  if (rp.long_from > 0) {
    LLM_CHECK(rp.inv_freq_long.size() == rp.inv_freq.size()) << "rope: " << rp.inv_freq_long.size()
                                                               << " long frequencies for " << rp.inv_freq.size();
    std::copy(rp.inv_freq_long.begin(), rp.inv_freq_long.end(), p.inv_freq_long);
  }
}

void set_cache(cuda::RopeKvParams& p, const Tensor& qkv, KvLayer& cache, int hkv, int head_dim) {
  LLM_CHECK(cache.k.rank() == 4 && cache.k.shape == cache.v.shape && cache.k.dim(2) == hkv &&
            cache.k.dim(3) == head_dim)
      << "kv cache " << cache.k.shape_str() << " is not [NB, B, " << hkv << ", " << head_dim << "]";
  LLM_CHECK(cache.k.dtype == qkv.dtype && cache.v.dtype == qkv.dtype)
      << "kv cache dtype " << dtype_name(cache.k.dtype) << " must equal qkv's " << dtype_name(qkv.dtype);
  p.k_cache = cache.k.data;
  p.v_cache = cache.v.data;
}
}  // namespace

void CudaBackend::rope(Tensor& qkv, const DeviceBatch& b, const RopeParams& rp, int hq, int hkv) {
  check_device(qkv, "rope qkv");
  cuda::RopeKvParams p = rope_params(qkv, b, hq, hkv, rp.head_dim);
  set_inv_freq(p, rp);
  p.do_write = false;
  cuda::launch_rope_write_kv(p, stream_);
}

void CudaBackend::write_kv(const Tensor& qkv, const DeviceBatch& b, int hq, int hkv, KvLayer& cache) {
  check_device(qkv, "write_kv qkv");
  check_device(cache.k, "write_kv cache");
  if (cache.quant != KvCacheDtype::Auto) return write_kv_quant(qkv, b, hq, hkv, cache);
  const int D = cache.k.rank() == 4 ? int(cache.k.dim(3)) : 0;
  // qkv is only read when do_rope is false.
  cuda::RopeKvParams p = rope_params(const_cast<Tensor&>(qkv), b, hq, hkv, D);
  set_cache(p, qkv, cache, hkv, D);
  p.do_rope = false;
  cuda::launch_rope_write_kv(p, stream_);
}

void CudaBackend::rope_write_kv(Tensor& qkv, const DeviceBatch& b, const RopeParams& rp, int hq, int hkv,
                                KvLayer& cache) {
  check_device(qkv, "rope_write_kv qkv");
  check_device(cache.k, "rope_write_kv cache");
  if (cache.quant != KvCacheDtype::Auto) {  // a quantized cache: rope, then the quantizing write
    rope(qkv, b, rp, hq, hkv);
    return write_kv(qkv, b, hq, hkv, cache);
  }
  cuda::RopeKvParams p = rope_params(qkv, b, hq, hkv, rp.head_dim);
  set_inv_freq(p, rp);
  set_cache(p, qkv, cache, hkv, rp.head_dim);
  cuda::launch_rope_write_kv(p, stream_);
}

float* CudaBackend::attention_workspace(size_t bytes) {
  void* p = attn_ws_;
  grow(p, attn_ws_bytes_, bytes);
  attn_ws_ = static_cast<float*>(p);
  return attn_ws_;
}

int* CudaBackend::attention_split_counters(size_t count) {
  const void* before = attn_counters_;
  grow(attn_counters_, attn_counters_bytes_, count * sizeof(int));
  if (attn_counters_ != before) CUDA_CHECK(cudaMemsetAsync(attn_counters_, 0, attn_counters_bytes_, stream_));
  return static_cast<int*>(attn_counters_);
}

void CudaBackend::attention(const Tensor& qkv, const KvLayer& cache, const DeviceBatch& b, int hq, int hkv,
                            float scale, Tensor& out, int window, float softcap) {
  check_device(qkv, "attention qkv");
  check_device(cache.k, "attention k cache");
  check_device(cache.v, "attention v cache");
  check_device(out, "attention out");
  LLM_CHECK(b.plan) << "attention: DeviceBatch without its BatchPlan";
  const BatchPlan& plan = *b.plan;
  const bool quant = cache.quant != KvCacheDtype::Auto;
  if (quant) check_quant_cache(cache, hkv);
  LLM_CHECK(cache.k.rank() == 4 && cache.k.shape == cache.v.shape && cache.k.dim(2) == hkv)
      << "attention: kv cache " << cache.k.shape_str() << " with " << hkv << " kv heads";
  const int D = int(cache.k.dim(3));
  const int64_t T = plan.num_tokens();
  LLM_CHECK(rows_of(qkv) == T && qkv.dim(-1) == int64_t(hq + 2 * hkv) * D)
      << "attention: qkv " << qkv.shape_str() << " for " << T << " tokens, heads " << hq << "/" << hkv << "x" << D;
  LLM_CHECK(out.numel() == T * hq * D && out.dtype == qkv.dtype &&
            (quant || (cache.k.dtype == qkv.dtype && cache.v.dtype == qkv.dtype)))
      << "attention: out " << out.shape_str() << " " << dtype_name(out.dtype) << ", qkv " << dtype_name(qkv.dtype)
      << ", cache " << dtype_name(cache.k.dtype);

  cuda::AttentionParams p;
  p.dtype = qkv.dtype;
  p.qkv = qkv.data;
  p.k_cache = cache.k.data;
  p.v_cache = cache.v.data;
  if (quant) {  // the codes are read in place
    p.kv_storage = cache.quant == KvCacheDtype::Int8 ? cuda::KvStorage::Int8 : cuda::KvStorage::Fp8;
    p.k_scale = cache.k_scale.ptr<float>();
    p.v_scale = cache.v_scale.ptr<float>();
  }
  p.out = out.data;
  p.positions = b.positions.ptr<int32_t>();
  p.query_start = b.query_start.ptr<int32_t>();
  p.block_table = b.block_table.ptr<int32_t>();
  p.num_seqs = plan.num_seqs();
  p.num_q_heads = hq;
  p.num_kv_heads = hkv;
  p.head_dim = D;
  p.block_size = int(cache.k.dim(1));
  p.max_blocks_per_seq = plan.max_blocks_per_seq;
  p.scale = scale;
  p.window = window;
  LLM_CHECK(softcap >= 0 && std::isfinite(softcap)) << "attention: softcap " << softcap;
  p.softcap = softcap;
  p.num_sms = num_sms_;
  p.max_query_len = b.shape.max_query_len;  // (prepare_batch: once per step, not per layer)
  p.max_context_len = b.shape.max_context_len;
  p.any_decode = b.shape.any_decode;
  p.any_prefill = b.shape.any_prefill;
  // Exact open-block rows (fp8, cuda_exact_rows.cpp): every token through the decode kernel, which
  // reads its own block from them.
  const bool exact = quant && cache.exact && b.exact_slot.numel() > 0;
  if (exact) {
    LLM_CHECK(b.exact_slot.numel() == plan.num_seqs()) << "attention: exact_slot for " << b.exact_slot.numel()
                                                        << " of " << plan.num_seqs() << " sequences";
    const KvExactStore& e = *cache.exact;
    for (int32_t slot : plan.exact_slot)
      LLM_CHECK(slot < e.device_slots()) << "attention: exact slot " << slot << " of " << e.device_slots()
                                         << " reserved (Backend::reserve_exact_slots)";
    LLM_CHECK(e.kv_heads == hkv && e.head_dim == D && e.block_size == p.block_size && e.k_dev.dtype == qkv.dtype)
        << "attention: exact rows of another shape or dtype than the cache";
    p.exact_slot = b.exact_slot.ptr<int32_t>();
    p.exact_k = e.k_dev.data;
    p.exact_v = e.v_dev.data;
    p.exact_ring_blocks = e.ring_blocks;
  }
  if (options_.deterministic || exact) {  // every token alone through the decode kernel
    p.token_seq = b.token_seq.ptr<int32_t>();
    p.num_tokens = int(T);
    if (options_.deterministic) p.fixed_partition_len = 512;  // and fixed partitions: batch invariant
  }
  if (T == 0) return;
  const size_t ws = cuda::attention_workspace_bytes(p);
  if (ws) {
    p.workspace = attention_workspace(ws);
    p.workspace_bytes = attn_ws_bytes_;
    p.split_counters = attention_split_counters(cuda::attention_split_counters(p));
    p.split_counters_count = attn_counters_bytes_ / sizeof(int);
  }
  cuda::launch_attention(p, stream_);
  if (exact) store_exact_rows(qkv, cache, b, hq, hkv);
}

// out[T, I] = act(gate_up[:, :I]) * gate_up[:, I:] through `launch` (SwiGLU or GeGLU).
void CudaBackend::gated_mul(const Tensor& gate_up, Tensor& out, const char* op,
                            void (*launch)(const cuda::SiluMulParams&, cudaStream_t)) {
  check_device(gate_up, op);
  check_device(out, op);
  const int64_t I = out.dim(-1), T = rows_of(out);
  LLM_CHECK(gate_up.dim(-1) == 2 * I && rows_of(gate_up) == T && gate_up.dtype == out.dtype)
      << op << ": gate_up " << gate_up.shape_str() << ", out " << out.shape_str();
  launch({gate_up.data, out.data, out.dtype, T, I}, stream_);
}

void CudaBackend::silu_mul(const Tensor& gate_up, Tensor& out) {
  gated_mul(gate_up, out, "silu_mul", &cuda::launch_silu_mul);
}

void CudaBackend::gelu_tanh_mul(const Tensor& gate_up, Tensor& out) {
  gated_mul(gate_up, out, "gelu_tanh_mul", &cuda::launch_gelu_tanh_mul);
}


void CudaBackend::scale(Tensor& x, float s) {
  check_device(x, "scale");
  cuda::launch_scale(x.data, x.dtype, x.numel(), s, stream_);
}

void CudaBackend::soft_cap(Tensor& x, float cap) {
  check_device(x, "soft_cap");
  LLM_CHECK(cap > 0 && std::isfinite(cap)) << "soft_cap: cap " << cap;
  cuda::launch_soft_cap(x.data, x.dtype, x.numel(), cap, stream_);
}

void CudaBackend::gather_rows(const Tensor& x, const DeviceBatch& b, Tensor& out) {
  check_device(x, "gather_rows x");
  check_device(out, "gather_rows out");
  const int64_t R = b.logits_rows.numel(), C = x.dim(-1);
  LLM_CHECK(out.numel() == R * C && out.dim(-1) == C) << "gather_rows: x " << x.shape_str() << ", out "
                                                      << out.shape_str() << ", " << R << " rows";
  cuda::launch_gather_rows({x.data, x.dtype, b.logits_rows.ptr<int32_t>(), out.data, out.dtype, R, C}, stream_);
}

void CudaBackend::copy_blocks(std::vector<KvLayer>& cache, const std::vector<std::pair<int, int>>& pairs) {
  for (KvLayer& l : cache) {
    check_device(l.k, "copy_blocks k");
    // Int8 caches have per-token scales beside the codes: their blocks move too (fp8's per-head
    // scales are not per block).
    std::vector<Tensor*> per_block = {&l.k, &l.v};
    if (l.quant == KvCacheDtype::Int8) per_block.insert(per_block.end(), {&l.k_scale, &l.v_scale});
    for (auto [src, dst] : pairs) {
      LLM_CHECK(src >= 0 && dst >= 0 && src < l.k.dim(0) && dst < l.k.dim(0)) << "copy_blocks: bad block id";
      for (Tensor* t : per_block) {
        LLM_CHECK(t->dim(0) == l.k.dim(0)) << "copy_blocks: a per-block tensor of " << t->dim(0) << " blocks";
        const size_t block_bytes = t->nbytes() / size_t(t->dim(0));
        CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(t->data) + dst * block_bytes,
                                   static_cast<const char*>(t->data) + src * block_bytes, block_bytes,
                                   cudaMemcpyDeviceToDevice, stream_));
      }
    }
  }
}

}  // namespace llmctl
