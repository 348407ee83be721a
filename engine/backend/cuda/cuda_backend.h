// CudaBackend: the Backend interface on one CUDA device, with its own non-blocking stream, cuBLAS
// handle and workspaces. Activations are the compute dtype (bf16 or f16), accumulation f32.
//
// Lifetimes and ordering:
//   - every op is enqueued on stream(); to_host_f32, upload and synchronize() wait for it.
//   - device tensors own their memory (Tensor::owner frees with cudaFree, which waits for the device).
//   - prepare_batch keeps a pointer to the BatchPlan in DeviceBatch::plan (attention sizes its grids
//     from it): the plan must outlive the DeviceBatch.
//   - the caller picks the current device: the constructor calls cudaSetDevice(device_index) once.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <unordered_map>

#include "engine/backend/backend.h"
#include "kernels/cuda/gemm_tuner.h"
#include "kernels/cuda/qlinear_tuner.h"

namespace llmctl::cuda {
struct SiluMulParams;  // kernels/cuda/elementwise.cuh
}

namespace llmctl {

bool cuda_device_available();
// Devices visible to this process (0 when none or no driver).
int cuda_device_count();

struct CudaOptions {
  bool graphs = true;          // replay decode steps from CUDA graphs (--enforce-eager turns them off)
  bool deterministic = false;  // batch-invariant kernels: the invariant GEMM, per-token attention
  bool autotune = true;        // GEMMs through cuBLASLt with per-shape measured algorithms
  std::string autotune_dir;    // where the measured choices are cached ("" = not kept)
  // Processes of the run that share this device (more ranks on a node than GPUs): each one's KV
  // budget is its share of what --gpu-memory-utilization leaves.
  int ranks_per_device = 1;
};

std::unique_ptr<Backend> make_cuda_backend(DType compute_dtype = DType::BF16, int device_index = 0,
                                           CudaOptions options = {});

class CudaBackend final : public Backend {
 public:
  CudaBackend(DType compute_dtype, int device_index, CudaOptions options = {});
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  Device device() const override { return Device::CUDA; }
  std::string name() const override { return name_; }
  DType activation_dtype() const override { return dtype_; }

  Tensor alloc(DType dtype, std::vector<int64_t> shape) override;
  // Without `dtype`, float tensors become the compute dtype and integer tensors keep theirs.
  Tensor upload(const Tensor& host, std::optional<DType> dtype = std::nullopt) override;
  Tensor to_host_f32(const Tensor& t) override;
  void copy_to_host(const Tensor& t, void* host) override;
  void copy_from_host(const void* host, Tensor& t) override;
  DeviceBatch prepare_batch(const BatchPlan& plan) override;
  void synchronize() override;
  std::optional<size_t> kv_cache_budget(double fraction, size_t reserve) override;

  // Graphs (cuda_graphs.cpp): the first run of a key is eager (it sizes workspaces), then captured.
  void run_graph(uint64_t key, const std::function<void()>& body) override;
  void clear_graphs() override;
  size_t num_graphs() const { return graphs_.size(); }

  // Device sampling (cuda_sampling.cpp).
  std::vector<int32_t> sample(const Tensor& logits, const std::vector<SampleJob>& jobs) override;
  const CudaOptions& options() const { return options_; }
  const cuda::GemmTuner* gemm_tuner() const { return tuner_.get(); }
  const cuda::QLinearTuner& qlinear_tuner() const { return qtuner_; }
  void step_timer_begin() override;
  double step_timer_end() override;

  using Backend::embed;  // the LinearWeight overload
  void embed(const Tensor& table, const DeviceBatch& b, Tensor& out, int64_t vocab_begin) override;
  // residual may be the compute dtype or f32.
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out, Tensor* residual) override;
  void head_rms_norm(Tensor& qkv, const Tensor& q_w, const Tensor& k_w, float eps, int num_q_heads,
                     int num_kv_heads) override;
  // w in another float dtype than x is converted per call into a temporary (slow path: upload
  // weights in the compute dtype).
  void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out) override;
  using Backend::linear;  // the LinearWeight overload
  // Dense, Int4Group and Int8Group (act-order too; cuda_quantized.cpp).
  LinearWeight upload_quantized(const LinearWeight& canonical) override;
  void linear_quantized(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& out) override;
  // KV caches auto, int8 and fp8 (cuda_quantized.cpp); fp8's exact open-block rows
  // (cuda_exact_rows.cpp): in device memory (KvExactStore::k_dev), read by the per-token
  // attention, stored after it.
  void reserve_exact_slots(std::vector<KvLayer>& cache, int slots) override;
  void copy_exact_rows(std::vector<KvLayer>& cache, const std::vector<int32_t>& pairs) override;
  void rope(Tensor& qkv, const DeviceBatch& b, const RopeParams& p, int num_q_heads, int num_kv_heads) override;
  void write_kv(const Tensor& qkv, const DeviceBatch& b, int num_q_heads, int num_kv_heads, KvLayer& cache) override;
  void attention(const Tensor& qkv, const KvLayer& cache, const DeviceBatch& b, int num_q_heads, int num_kv_heads,
                 float scale, Tensor& out, int window = 0, float softcap = 0.0f) override;
  void silu_mul(const Tensor& gate_up, Tensor& out) override;
  void gelu_tanh_mul(const Tensor& gate_up, Tensor& out) override;
  void scale(Tensor& x, float s) override;
  void soft_cap(Tensor& x, float cap) override;
  void gather_rows(const Tensor& x, const DeviceBatch& b, Tensor& out) override;
  // Mixture-of-experts row ops (cuda_moe.cpp): the host's rows and weights are uploaded first.
  void gather_token_rows(const Tensor& x, std::span<const int32_t> rows, Tensor& out) override;
  void scatter_add_rows(const Tensor& y, std::span<const int32_t> rows, std::span<const float> weights,
                        Tensor& out) override;
  void fill_zero(Tensor& t) override;
  void copy_blocks(std::vector<KvLayer>& cache, const std::vector<std::pair<int, int>>& pairs) override;

  // rope and write_kv in one pass (same result as rope then write_kv).
  void rope_write_kv(Tensor& qkv, const DeviceBatch& b, const RopeParams& p, int num_q_heads, int num_kv_heads,
                     KvLayer& cache) override;
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  int device_index() const { return device_; }
  int num_sms() const { return num_sms_; }

 private:
  void check_device(const Tensor& t, const char* what) const;
  void gated_mul(const Tensor& gate_up, Tensor& out, const char* op,
                 void (*launch)(const cuda::SiluMulParams&, cudaStream_t));
  float* attention_workspace(size_t bytes);
  int* attention_split_counters(size_t count);  // zeroed when (re)allocated; kernels leave them zero
  // A device buffer that only grows; growing clears the graphs (they hold its old address).
  void* grow(void*& buf, size_t& cap, size_t bytes);
  // Quantized KV caches (cuda_quantized.cpp): write_kv quantizing, and the checks attention makes
  // before its kernels read the codes in place (kernels/cuda/attention.cuh, KvStorage).
  void write_kv_quant(const Tensor& qkv, const DeviceBatch& b, int num_q_heads, int num_kv_heads, KvLayer& cache);
  void check_quant_cache(const KvLayer& cache, int num_kv_heads) const;
  // After a step's attention: the step's rows of each sequence's last ring blocks into its exact slot.
  void store_exact_rows(const Tensor& qkv, const KvLayer& cache, const DeviceBatch& b, int num_q_heads,
                        int num_kv_heads);

  DType dtype_;
  CudaOptions options_;
  int device_ = 0;
  int num_sms_ = 0;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  void* cublas_ws_ = nullptr;
  float* attn_ws_ = nullptr;
  size_t attn_ws_bytes_ = 0;
  void* attn_counters_ = nullptr;
  size_t attn_counters_bytes_ = 0;
  void* pinned_ = nullptr;  // staging for prepare_batch
  size_t pinned_bytes_ = 0;
  cudaEvent_t pinned_free_ = nullptr;  // recorded after the copy out of pinned_
  std::unique_ptr<cuda::GemmTuner> tuner_;
  cuda::QLinearTuner qtuner_;  // quantized linears: which kernel per shape (with autotune)
  cudaEvent_t step_begin_ = nullptr, step_end_ = nullptr;
  void* batch_dev_ = nullptr;          // prepare_batch's arrays (fixed address for graphs)
  size_t batch_dev_bytes_ = 0;
  std::unordered_map<uint64_t, cudaGraphExec_t> graphs_;
  // A quantized linear's kernel parameters, the shapes and devices checked (x as given: the caller
  // gathers an act-order weight's columns).
  cuda::QLinearParams qlinear_params(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& out);
  // Whether linear_quantized runs the CUDA-core qlinear for w over T tokens (what qlinear_grouped
  // reproduces bit for bit).
  bool runs_cuda_core_qlinear(const LinearWeight& w, int64_t T) const;
  // A mixture of experts' grouped linears (cuda_moe.cpp): the quantized items that would run the
  // CUDA-core kernel go to one qlinear_grouped launch; the rest as linear() runs them.
  void run_linear_group(std::span<const GroupedLinear> items) override;
  void* group_dev_ = nullptr;  // qlinear_grouped's items, uploaded per call
  size_t group_dev_bytes_ = 0;
  // The mixture-of-experts ops' rows and weights, uploaded per call (cuda_moe.cpp).
  void* moe_dev_ = nullptr;
  size_t moe_dev_bytes_ = 0;
  // rows (and weights) copied to moe_dev_: int32 rows first, f32 weights after them.
  const int32_t* upload_rows(std::span<const int32_t> rows, std::span<const float> weights, const float** dev_weights);
  void* perm_scratch_ = nullptr;  // linear_quantized's input with an act-order weight's columns gathered
  size_t perm_scratch_bytes_ = 0;
  // Sampling buffers: jobs and edits (device and pinned staging), scratch rows, tokens.
  void* sample_dev_ = nullptr;
  size_t sample_dev_bytes_ = 0;
  void* sample_pinned_ = nullptr;
  size_t sample_pinned_bytes_ = 0;
  void* sample_scratch_ = nullptr;
  size_t sample_scratch_bytes_ = 0;
};

}  // namespace llmctl
