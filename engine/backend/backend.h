// Backend: the only door to kernels. The decoder forward (engine/model/decoder_model.h and each
// family's layer loop under engine/model/<family>/) is written once against this interface; cpu/ and
// cuda/ implement it (ForwardingBackend, forwarding_backend.h, decorates one). Tensors passed to ops live on the
// backend's device. Activations are f32 on CPU; on CUDA they are the model's compute dtype
// (bf16/f16) with f32 accumulation. Weights keep their stored dtype.
//
// Shapes: T = tokens in the step, H = hidden size, Hq/Hkv = query/kv heads, D = head dim,
// I = intermediate size, V = vocab size, B = block size, NB = blocks in the pool.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend/act_quant.h"
#include "engine/backend/kv_cache_dtype.h"
#include "engine/backend/kv_exact_rows.h"
#include "engine/backend/linear_weight.h"
#include "engine/core/batch_plan.h"
#include "engine/core/loop_account.h"
#include "engine/core/sample_job.h"
#include "engine/core/tensor.h"

namespace llmctl {

// Rotary embedding frequencies (HF rotate-half layout), computed once per model.
struct RopeParams {
  int head_dim = 0;
  // Partial rotary (Phi-4-mini, GLM): the first rotary_dim dimensions of each head turn, as pairs
  // (i, i + rotary_dim / 2); the rest pass through. 0: all head_dim of them.
  int rotary_dim = 0;
  int rotary() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
  std::vector<float> inv_freq;  // [rotary() / 2], scaling (linear, llama3, yarn, longrope's short factors) applied
  // LongRoPE: positions >= long_from (when > 0) turn at inv_freq_long ([rotary() / 2], the long factors)
  // instead, as vLLM does (transformers switches a whole forward past the original context).
  std::vector<float> inv_freq_long;
  int32_t long_from = 0;
  // YaRN's and LongRoPE's attention factor: cos and sin are multiplied by it (so the turning part
  // of q and k; with partial rotary the rest is not), as transformers does.
  float attention_scaling = 1.0f;
  const float* inv_freq_at(int32_t position) const {
    return long_from > 0 && position >= long_from ? inv_freq_long.data() : inv_freq.data();
  }
};

// One layer's paged KV cache: k and v are [NB, B, Hkv, D] of the activation dtype (Auto), int8
// codes (Int8) or fp8 e4m3 codes as U8 (Fp8). Scales, f32: Int8 [NB, B, Hkv, 2] (scale, zero point)
// per token and kv head, written with the codes; Fp8 [Hkv], fixed; Auto none.
// exact: the fp8 cache's open-block rows in f32 (engine/backend/kv_exact_rows.h), where the
// backend keeps them (BackendCaps::kv_exact_rows); null otherwise.
struct KvLayer {
  KvLayer() = default;
  KvLayer(Tensor k_cache, Tensor v_cache) : k(std::move(k_cache)), v(std::move(v_cache)) {}  // unquantized
  Tensor k, v;
  KvCacheDtype quant = KvCacheDtype::Auto;
  Tensor k_scale, v_scale;
  std::shared_ptr<KvExactStore> exact;
};

// A step's BatchPlan in the backend's memory (device copies of the index arrays).
struct DeviceBatch {
  const BatchPlan* plan = nullptr;
  BatchShape shape;  // batch_shape(*plan), once per step
  Tensor token_ids, positions, slot_mapping, query_start, context_len, block_table, logits_rows;  // i32
  Tensor token_seq;  // i32 [T]: the sequence of each token
  Tensor exact_slot;  // i32 [S], each sequence's exact KV slot (-1: none), where the backend keeps them; else empty
  // i32 [T] and [S, Mw]: the plan's window tables (empty without them); the runner hands them to
  // sliding layers as slot_mapping and block_table of a batch of their own
  Tensor window_slot_mapping, window_block_table;
};

// What a backend can do, set once at construction (Backend::caps()): the loader, the runner, the
// sampler and the CLI read it instead of asking the backend question by question.
struct BackendCaps {
  std::vector<WeightFormat> weight_formats;  // linear() / linear_quantized() run these as stored
  bool input_perm = false;       // quantized weights with an act-order input_perm (else dequantized at load)
  bool quantized_embed = false;  // embedding lookups from a packed quantized table (embed_quantized)
  std::vector<KvCacheDtype> kv_dtypes{KvCacheDtype::Auto};  // caches write_kv / attention / copy_blocks take
  std::vector<KvCacheDtype> kv_exact_rows;  // KV dtypes whose open blocks it also keeps exact (KvLayer::exact)
  bool sampling = false;         // sample() draws tokens where the logits are
  bool graphs = false;           // run_graph captures and replays
  bool moe = false;              // gather_token_rows / scatter_add_rows / fill_zero: mixture-of-experts layers

  bool supports(WeightFormat f) const;
  bool supports_kv_cache(KvCacheDtype d) const;
  bool supports_kv_exact_rows(KvCacheDtype d) const;
  // "weights f32,f16,bf16,int4-group,int8-group (act-order); kv auto,int8,fp8 (exact fp8); ..."
  std::string describe() const;
};

class Backend {
 public:
  virtual ~Backend() = default;
  const BackendCaps& caps() const { return caps_; }
  virtual Device device() const = 0;
  virtual std::string name() const = 0;
  virtual DType activation_dtype() const = 0;

  // Memory. upload copies a host tensor (e.g. a weight) to the device, converting to `dtype`
  // when given (F32/F16/BF16 only).
  virtual Tensor alloc(DType dtype, std::vector<int64_t> shape) = 0;
  virtual Tensor upload(const Tensor& host, std::optional<DType> dtype = std::nullopt) = 0;
  virtual Tensor to_host_f32(const Tensor& t) = 0;  // copy back, converted to f32
  // A contiguous tensor's bytes, as stored, to / from host memory of t.nbytes() (pipeline stages
  // hand their activations over in host memory). Both wait for the device. Default: host tensors.
  virtual void copy_to_host(const Tensor& t, void* host);
  virtual void copy_from_host(const void* host, Tensor& t);
  virtual DeviceBatch prepare_batch(const BatchPlan& plan) = 0;
  virtual void synchronize() {}
  // Bytes a KV cache may take when the process may use `fraction` of the device's memory, given
  // what is allocated now (weights) and `reserve` more for activations; nullopt without a device.
  virtual std::optional<size_t> kv_cache_budget(double fraction, size_t reserve) {
    (void)fraction, (void)reserve;
    return std::nullopt;
  }

  // Graphs: run_graph replays the ops `body` enqueues from a graph captured the first time `key`
  // is seen (the caller guarantees the same shapes and pointers for the same key); clear_graphs
  // drops them (when a buffer they use moves). Backends without graphs run body.
  virtual void run_graph(uint64_t key, const std::function<void()>& body) {
    (void)key;
    body();
  }
  virtual void clear_graphs() {}

  // Device time from step_timer_begin to step_timer_end (the GPU busy inside a step, counted from
  // its first enqueued op to its last); 0 where not measured.
  virtual void step_timer_begin() {}
  virtual double step_timer_end() { return 0; }
  // A CPU backend whose threads are modelled (make_cpu_backend's simulate_threads): its loops so far;
  // nullopt where its threads are real.
  virtual std::optional<LoopAccount> thread_model_account() const { return std::nullopt; }

  // Sampling: with caps().sampling, sample() returns one token per job from logits [R, V] (f32, on
  // the backend's device: no row is copied to the host); -1 for a job whose every candidate is
  // suppressed (the caller fails that sequence alone). The CPU's is the reference
  // (backend/cpu/cpu_sampling.h).
  virtual std::vector<int32_t> sample(const Tensor& logits, const std::vector<SampleJob>& jobs);

  // out[T,H] = table[ids[t] - vocab_begin, :]               table [V,H] any float dtype
  // A vocab-parallel rank's table holds ids [vocab_begin, vocab_begin + V): other ids give zero rows
  // (the all-reduce over the ranks fills them in). Single rank: vocab_begin 0, every id must be < V.
  virtual void embed(const Tensor& table, const DeviceBatch& b, Tensor& out, int64_t vocab_begin) = 0;
  // The same lookup from a LinearWeight table [V, H] (this rank's vocab rows): a dense one goes to
  // embed(Tensor); a quantized one (a GGUF's tied table, kept packed for the lm_head) has its rows
  // dequantized at lookup by embed_quantized, on a backend whose caps().quantized_embed (the
  // loader keeps a float table for the others).
  void embed(const LinearWeight& table, const DeviceBatch& b, Tensor& out, int64_t vocab_begin);
  virtual void embed_quantized(const LinearWeight& table, const DeviceBatch& b, Tensor& out, int64_t vocab_begin);
  // With residual: residual[T,H] += x; out = rmsnorm(residual) * w. Without: out = rmsnorm(x) * w.
  // The residual stream is f32 on every backend; x may be f32 while out is the activation dtype.
  virtual void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out, Tensor* residual) = 0;
  // In place on qkv [T, (Hq + 2 Hkv) D]: each of the Hq q heads and Hkv k heads (v untouched) becomes
  // rmsnorm(head) * w ([D] f32: q_w for q heads, k_w for k heads), as Qwen3 does before rope. The
  // default refuses by name (a family that needs it does not run on a backend without it).
  virtual void head_rms_norm(Tensor& qkv, const Tensor& q_w, const Tensor& k_w, float eps, int num_q_heads,
                             int num_kv_heads);
  // out[T,N] = x[T,K] @ w[N,K]^T (+ bias[N])                w f32/f16/bf16
  virtual void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out) = 0;
  // Throws InputError naming the backend and the format unless caps().supports(f).
  void require_support(WeightFormat f) const;
  // A quantized linear weight (Int4Group / Int8Group) on this backend, packed in its own layout.
  // The loader (engine/model/weights/load_weights.h, upload_linear) calls it only for a format
  // caps().supports() accepts, with the weight in canonical form:
  //   format     Int4Group (codes 0..15) or Int8Group (codes -128..127);
  //   n, k       this rank's [N, K], K a multiple of 32; group_size: 16 or a multiple of 32 dividing K;
  //   data       host U8 [N, K], one code per byte, row-major (8 bits: the int8 code's bit pattern);
  //   scales     host [N, K / group_size], zeros (the offsets) the same shape and dtype: F16 when
  //              every scale and offset is exact in f16, else F32;
  //   w[n, k] = scales[n, k / group_size] * code[n, k] + zeros[n, k / group_size];
  //   input_perm empty, or host I32 [K] (act-order) when caps().input_perm; shard as loaded.
  // Returns the LinearWeight linear() takes (data in the backend's packed layout, on its device;
  // same format, n, k, group_size, shard; scales/zeros as the backend keeps them, empty where the
  // packed data holds its own copies). Default: refuses, naming the backend and the format.
  virtual LinearWeight upload_quantized(const LinearWeight& canonical);
  // With caps().supports_kv_exact_rows(d), the attention keeps and reads exact open-block rows
  // beside a cache of dtype d (KvLayer::exact, BatchPlan::exact_slot): it reads a query's own block
  // from them and stores the step's rows in their slots.
  // For each (src, dst) slot pair (flattened), every layer's exact slot dst becomes a copy of src
  // (forks). The default copies the host stores KvLayer::exact holds.
  virtual void copy_exact_rows(std::vector<KvLayer>& cache, const std::vector<int32_t>& pairs);
  // Room in every layer's exact store for slots [0, slots), made before a step that uses them
  // (outside any graph capture). A device backend allocates here (KvExactStore::k_dev; the
  // addresses change, and graphs holding the old ones are dropped); the default does nothing: the
  // host stores grow as the CPU attention writes them.
  virtual void reserve_exact_slots(std::vector<KvLayer>& cache, int slots) {
    (void)cache;
    (void)slots;
  }
  // The same product for a weight with a format: refuses a format this backend does not support
  // (by name), dispatches dense weights to linear(x, w.data, ...) and quantized ones to
  // linear_quantized. w is this rank's slice [N, K].
  // Counts the bytes of w it reads (weight_bytes_read).
  void linear(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& out);
  // The bytes of the linears' weights (codes, scales, zeros) the ops above and linear_group read
  // since the last call; the step's, when called after each step. What a decoded token reads of
  // the weights (a mixture of experts: only its routed experts'), the KV cache aside.
  uint64_t take_weight_bytes() { return std::exchange(weight_bytes_, 0); }
  // out[T,N] = x[T,K] @ dequant(w)[N,K]^T (+ bias[N]) for a quantized w (Int4Group/Int8Group) as
  // upload_quantized made it. Default: refuses, naming the backend and the format.
  virtual void linear_quantized(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& out);
  // The attention ops take the fused projection qkv[T, (Hq + 2*Hkv) * D]: q, then k, then v.
  // In place: rotates the q and k parts at b.positions.
  virtual void rope(Tensor& qkv, const DeviceBatch& b, const RopeParams& p, int num_q_heads, int num_kv_heads) = 0;
  // cache.k/v[slot_mapping[t]] = the k/v parts of qkv[t] (quantized, with their scales, for a
  // quantized cache)
  virtual void write_kv(const Tensor& qkv, const DeviceBatch& b, int num_q_heads, int num_kv_heads, KvLayer& cache) = 0;
  // rope then write_kv; backends fuse them into one pass.
  virtual void rope_write_kv(Tensor& qkv, const DeviceBatch& b, const RopeParams& p, int num_q_heads,
                             int num_kv_heads, KvLayer& cache) {
    rope(qkv, b, p, num_q_heads, num_kv_heads);
    write_kv(qkv, b, num_q_heads, num_kv_heads, cache);
  }
  // out[T, Hq*D]: causal attention of each new token's q over its sequence's cache (positions <= its
  // own; with window > 0, only positions > its own - window), GQA: query head h reads kv head
  // h / (Hq / Hkv). With softcap > 0 each score s = scale * q.k becomes softcap * tanh(s / softcap)
  // before the softmax (Gemma 2's attention logit soft-capping).
  virtual void attention(const Tensor& qkv, const KvLayer& cache, const DeviceBatch& b, int num_q_heads,
                         int num_kv_heads, float scale, Tensor& out, int window = 0, float softcap = 0.0f) = 0;
  // out[T,I] = silu(gate_up[:, :I]) * gate_up[:, I:]        gate_up [T, 2I]
  virtual void silu_mul(const Tensor& gate_up, Tensor& out) = 0;
  // out[T,I] = gelu_tanh(gate_up[:, :I]) * gate_up[:, I:] (GeGLU with PyTorch's tanh-approximated
  // GELU, 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))): Gemma). The default refuses by name.
  virtual void gelu_tanh_mul(const Tensor& gate_up, Tensor& out);
  // x *= s in place, every element (Gemma's embedding scale). The default refuses by name.
  virtual void scale(Tensor& x, float s);
  // x = cap * tanh(x / cap) in place, every element (Gemma 2's final logit soft-capping). The default
  // refuses by name.
  virtual void soft_cap(Tensor& x, float cap);
  // out[R, C] = x[rows[r], :]
  virtual void gather_rows(const Tensor& x, const DeviceBatch& b, Tensor& out) = 0;
  // Several linears at once, each out_i [n_i, N_i] = x_i [n_i, K_i] @ w_i^T (a mixture of experts'
  // routed experts, each over its tokens' rows): the results of linear(x_i, *w_i, nullptr, out_i)
  // for each (run_linear_group does the work; a backend may run them in one pass over its cores).
  struct GroupedLinear {
    Tensor x;
    const LinearWeight* w = nullptr;
    Tensor out;
  };
  void linear_group(std::span<const GroupedLinear> items);
  // Mixture of experts (engine/model/layers/moe_block.h; caps().moe). The defaults refuse by name.
  // out[i, :] = x[rows[i], :]                              x [T, C], out [n, C]
  virtual void gather_token_rows(const Tensor& x, std::span<const int32_t> rows, Tensor& out);
  // out[rows[i], :] += weights[i] * y[i, :], for i in order  y [n, C], out [T, C]
  virtual void scatter_add_rows(const Tensor& y, std::span<const int32_t> rows, std::span<const float> weights,
                                Tensor& out);
  // t = 0, every element
  virtual void fill_zero(Tensor& t);
  // Copy-on-write of the paged cache: for each (src, dst), block dst of every layer's k and v
  // (and their per-token scales) becomes a copy of block src.
  virtual void copy_blocks(std::vector<KvLayer>& cache, const std::vector<std::pair<int, int>>& pairs) = 0;

 protected:
  BackendCaps caps_;  // set by each backend's constructor
  // linear_group's work. Default: each item as linear() runs it (dense or quantized), one by one.
  virtual void run_linear_group(std::span<const GroupedLinear> items);
  // linear() without the count: dense w to linear(x, w.data, ...), quantized to linear_quantized.
  void dispatch_linear(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& out);

 private:
  uint64_t weight_bytes_ = 0;
};

// act_quant: what the quantized linears do with the activations (engine/backend/act_quant.h).
// kernels: which CPU kernels the process runs (kernels/cpu/qlinear.h select_cpu_kernels), chosen
// here before any weight is packed; nullopt keeps the process's choice (the best the CPU has, unless
// an earlier backend stepped down).
struct CpuKernelOptions {
  std::string isa = "auto";  // auto | amx | avx512-vnni | avx-vnni | avx2 | scalar
  bool rows_layout = false;  // quantized weights in the Rows layout, not RowLane16
  std::string prefetch = "auto";  // auto | all | wide: which codes AVX2 decode prefetches (qlinear_prefetch)
  std::string codebook_prefill = "auto";  // auto | magnitude | narrow (qlinear_codebook_prefill)
};
// simulate_threads: the loops run on the calling thread alone and num_threads are modelled
// (ThreadPool::Model::Simulated; Backend::thread_model_account), for measuring the engine's scaling
// past the cores at hand.
std::unique_ptr<Backend> make_cpu_backend(int num_threads = 0, ActQuantMode act_quant = ActQuantMode::Int8,
                                          const std::optional<CpuKernelOptions>& kernels = std::nullopt,
                                          bool simulate_threads = false);

}  // namespace llmctl
