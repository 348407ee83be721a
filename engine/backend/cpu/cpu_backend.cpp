// CPU backend: f32 activations, weights in their stored dtype (f32/f16/bf16) or group-quantized
// (Int4Group/Int8Group, kernels/cpu/qlinear.h), rows split across the thread pool. The reference
// the CUDA backend is checked against.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cpu/cpu_attention_items.h"
#include "engine/backend/cpu/cpu_exact_rows.h"
#include "engine/backend/cpu/cpu_linear_pieces.h"
#include "engine/backend/cpu/cpu_sampling.h"
#include "engine/backend/cpu/cpu_split_attention.h"
#include "engine/backend/cpu/cpu_quantized_weight.h"
#include "engine/core/error.h"
#include "engine/core/host_arena.h"
#include "engine/core/thread_pool.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/kv_quant.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/qlinear.h"
#include "kernels/kernel_check.h"

namespace llmctl {

namespace {

kernels::WeightType weight_type(DType t) {
  switch (t) {
    case DType::F32: return kernels::WeightType::F32;
    case DType::F16: return kernels::WeightType::F16;
    case DType::BF16: return kernels::WeightType::BF16;
    default: LLM_CHECK(false) << "linear: unsupported weight dtype " << dtype_name(t);
  }
  return kernels::WeightType::F32;
}

void check_f32(const Tensor& t, const char* what) {
  LLM_CHECK(t.dtype == DType::F32 && t.device == Device::CPU) << what << " must be a host f32 tensor";
}

class CpuBackend final : public Backend {
 public:
  CpuBackend(int threads, ActQuantMode act_quant, bool simulate_threads)
      : pool_(threads, simulate_threads ? ThreadPool::Model::Simulated : ThreadPool::Model::Threads),
        act_quant_(act_quant) {
    caps_.weight_formats = {WeightFormat::DenseF32, WeightFormat::DenseF16, WeightFormat::DenseBF16,
                            WeightFormat::Int4Group, WeightFormat::Int8Group};
    caps_.input_perm = true;
    caps_.quantized_embed = true;
    caps_.kv_dtypes = {KvCacheDtype::Auto, KvCacheDtype::Int8, KvCacheDtype::Fp8};
    caps_.kv_exact_rows = {KvCacheDtype::Fp8};
    caps_.moe = true;
    caps_.sampling = true;  // the reference sampler (host rows; engine/sample's step sampler draws them itself)
  }

  Device device() const override { return Device::CPU; }
  std::optional<LoopAccount> thread_model_account() const override {
    if (!pool_.simulated()) return std::nullopt;
    return pool_.account();
  }
  std::string name() const override {
    const std::string isa = kernels::qlinear_isa();  // the AVX2 decode tiles' prefetch choice beside theirs
    const bool avx2_tiles = isa == "avx2" || isa == "avx-vnni";
    return "cpu (" + std::to_string(pool_.size()) + (pool_.simulated() ? " modelled" : "") + " threads, " +
           (kernels::cpu_has_avx2() ? "avx2" : "scalar") + ", quantized " + isa +
           (kernels::qlinear_amx() ? " + amx" : "") +
           (avx2_tiles ? std::string(" (prefetch ") + kernels::qlinear_prefetch() + ")" : std::string()) +
           ", act-quant " + act_quant_name(act_quant_) + ")";
  }
  DType activation_dtype() const override { return DType::F32; }
  std::vector<int32_t> sample(const Tensor& logits, const std::vector<SampleJob>& jobs) override {
    return cpu_sample(logits, jobs);
  }

  Tensor alloc(DType dtype, std::vector<int64_t> shape) override { return Tensor::empty_host(dtype, std::move(shape)); }

  Tensor upload(const Tensor& host, std::optional<DType> dtype) override {
    if (!dtype || *dtype == host.dtype) return host;  // already in host memory: share it
    return convert_host(host, *dtype);
  }

  Tensor to_host_f32(const Tensor& t) override { return t.dtype == DType::F32 ? t : convert_host(t, DType::F32); }

  DeviceBatch prepare_batch(const BatchPlan& plan) override {
    DeviceBatch b;
    b.plan = &plan;
    b.shape = batch_shape(plan);
    return b;  // the CPU kernels read the plan's host arrays directly
  }

  using Backend::embed;  // the LinearWeight overload
  void embed(const Tensor& table, const DeviceBatch& b, Tensor& out, int64_t vocab_begin) override {
    const int64_t H = table.dim(1);
    for_each_embedded(b, out, H, table.dim(0), vocab_begin, [&](int64_t id, float* o) {
      const size_t off = size_t(id) * H;
      switch (table.dtype) {
        case DType::F32: std::memcpy(o, table.ptr<float>() + off, H * 4); break;
        case DType::BF16:
          for (int64_t i = 0; i < H; ++i) o[i] = bf16_to_f32(table.ptr<uint16_t>()[off + i]);
          break;
        case DType::F16:
          for (int64_t i = 0; i < H; ++i) o[i] = f16_to_f32(table.ptr<uint16_t>()[off + i]);
          break;
        default: LLM_CHECK(false) << "embed: unsupported dtype " << dtype_name(table.dtype);
      }
    });
  }

  // Rows of the packed table dequantized one at a time (the values the float table would hold).
  void embed_quantized(const LinearWeight& table, const DeviceBatch& b, Tensor& out, int64_t vocab_begin) override {
    std::vector<CpuQSegment> scratch;
    const std::vector<CpuQSegment>& segs = cpu_qweight_parts(table, scratch);
    const int64_t H = table.k;
    for_each_embedded(b, out, H, table.n, vocab_begin, [&](int64_t id, float* o) {
      size_t s = segs.size() - 1;  // the part holding row id
      while (segs[s].row0 > id) --s;
      const kernels::QWeightView& view = segs[s].view;
      id -= segs[s].row0;
      if (table.input_perm.empty()) return kernels::qweight_dequantize_row(view, id, o);
      std::vector<float> packed_order(static_cast<size_t>(H));  // act-order: packed column j is perm[j]
      kernels::qweight_dequantize_row(view, id, packed_order.data());
      const int32_t* perm = table.input_perm.ptr<int32_t>();
      for (int64_t j = 0; j < H; ++j) o[perm[j]] = packed_order[size_t(j)];
    });
  }

  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out, Tensor* residual) override {
    check_f32(x, "rms_norm input");
    check_f32(w, "rms_norm weight");
    const int64_t H = x.dim(-1), R = x.numel() / H;
    float* res = residual ? residual->ptr<float>() : nullptr;
    pool_.parallel_for(R, [&](int64_t r0, int64_t r1) {
      kernels::rms_norm_rows(x.ptr<float>(), w.ptr<float>(), eps, H, r0, r1, out.ptr<float>(), res);
    });
  }

  void head_rms_norm(Tensor& qkv, const Tensor& q_w, const Tensor& k_w, float eps, int hq, int hkv) override {
    check_f32(qkv, "head_rms_norm qkv");
    check_f32(q_w, "head_rms_norm q weight");
    check_f32(k_w, "head_rms_norm k weight");
    const int64_t D = q_w.numel();
    LLM_CHECK(qkv.rank() == 2 && D > 0 && k_w.numel() == D && qkv.dim(1) == (hq + 2 * int64_t(hkv)) * D)
        << "head_rms_norm: qkv " << qkv.shape_str() << ", " << hq << " + " << hkv << " heads of " << D;
    pool_.parallel_for(qkv.dim(0), [&](int64_t r0, int64_t r1) {
      kernels::head_rms_norm_rows(qkv.ptr<float>(), D, hq, hkv, q_w.ptr<float>(), k_w.ptr<float>(), eps, r0, r1);
    });
  }

  using Backend::linear;  // the LinearWeight overload

  LinearWeight upload_quantized(const LinearWeight& canonical) override {
    return pack_cpu_quantized(canonical, &pool_, &weight_arena_);
  }

  // Tokens up to which a mixture of experts' items go to the pool in balanced pieces
  // (ThreadPool::parallel_for, run_linear_group).
  static constexpr int64_t kBalancedTokens = 4;
  // Blocks of 32 activations from which a decode step's rows are quantized by the pool's threads
  // together (K 4,096 and up for one token: about 1.4 us on one core, a loop's hand-off well under it)
  static constexpr int64_t kSplitActBlocks = 128;
  // Columns of a gated activation's row a thread takes at least (CpuBackend::gated)
  static constexpr int64_t kGatedCols = 1024;

  // Int8 mode: x quantized once (scratch kept across calls), then the output rows split over the
  // pool in chunks of 16 as the dense linear does; each row's result does not depend on the split.
  void linear_quantized(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& out) override {
    check_f32(x, "linear input");
    std::vector<CpuQSegment> scratch;
    const std::vector<CpuQSegment>& segs = cpu_qweight_parts(w, scratch);  // one, or fused parts each in its form
    const int64_t T = x.dim(0), K = x.dim(1), N = w.n;
    LLM_CHECK(x.rank() == 2 && K == w.k && out.dim(0) == T && out.dim(1) == N)
        << "linear shapes: x " << x.shape_str() << " w " << weight_format_name(w.format) << " [" << w.n << ", " << w.k
        << "] out " << out.shape_str();
    const float* b = bias ? bias->ptr<float>() : nullptr;
    const float* xp = x.ptr<float>();
    if (!w.input_perm.empty()) {  // act-order: xp[t, j] = x[t, input_perm[j]], the packed column order
      if (perm_scratch_.size() < size_t(T * K)) perm_scratch_.resize(size_t(T * K));
      const int32_t* perm = w.input_perm.ptr<int32_t>();
      float* dst = perm_scratch_.data();
      pool_.parallel_for(T, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t)
          for (int64_t j = 0; j < K; ++j) dst[t * K + j] = xp[t * K + perm[j]];
      });
      xp = dst;
    }
    kernels::QActivations qx;
    if (act_quant_ == ActQuantMode::Int8) {
      bool widened = false;  // a prompt over a part that takes them as int16: written once, for every thread
      if (T > 1)
        for (const CpuQSegment& seg : segs) widened = widened || kernels::qlinear_widens_activations(seg.view);
      const size_t need = kernels::qactivation_bytes(T, K, widened) + 64;
      if (act_scratch_.size() < need) act_scratch_.resize(need);
      const auto at = reinterpret_cast<uintptr_t>(act_scratch_.data());
      void* buf = act_scratch_.data() + (64 - at % 64) % 64;
      const int64_t blocks = T * K / 32;
      if (T < kernels::kActTileMinRows && blocks >= kSplitActBlocks && pool_.size() > 1) {
        // a decode step's wide rows: their blocks split over the pool, in runs of 16 (each block's
        // bytes do not depend on the split), rather than one thread quantizing while the others wait
        qx = kernels::quantize_activation_blocks(xp, T, K, 0, 0, buf);  // the view
        pool_.parallel_for((blocks + 15) / 16, [&](int64_t u0, int64_t u1) {
          kernels::quantize_activation_blocks(xp, T, K, u0 * 16, std::min(blocks, u1 * 16), buf);
        });
      } else if (T == 1) {
        qx = kernels::quantize_activations(xp, T, K, buf);
      } else {  // rows split over the pool (each row's bytes do not depend on the split)
        qx = kernels::quantize_activation_rows(xp, T, K, 0, 0, buf, widened);  // the view
        pool_.parallel_for(T, [&](int64_t t0, int64_t t1) {
          kernels::quantize_activation_rows(xp, T, K, t0, t1, buf, widened);
        });
      }
    }
    const int64_t chunk = 16, chunks = (N + chunk - 1) / chunk;
    const cpu::TokenSplit split = cpu::token_split(T, chunks, pool_.size());
    std::vector<int64_t>& bounds = piece_bounds_;
    cpu::linear_piece_bounds(segs, N, T, split, pool_.size(), bounds);
    // units: split-major (unit u: tokens of split u / chunks, rows of chunk u % chunks)
    pool_.parallel_for(int64_t(bounds.size()) - 1, [&](int64_t q0, int64_t q1) {
      const int64_t p0 = bounds[size_t(q0)], p1 = bounds[size_t(q1)];
      for (int64_t s = p0 / chunks; s * chunks < p1; ++s) {  // the token ranges this piece covers
        const int64_t t0 = std::min(T, s * split.tokens), t1 = std::min(T, t0 + split.tokens);
        const int64_t c0 = std::max(p0, s * chunks) - s * chunks, c1 = std::min(p1, (s + 1) * chunks) - s * chunks;
        if (t0 < t1 && c0 < c1) linear_rows(segs, qx, xp, t0, t1, K, N, b, c0 * chunk, std::min(N, c1 * chunk), out);
      }
    });  // one piece a thread (a thread late to start still leaves its piece to the others): a decode
         // step's linears in 8 balanced pieces cost the default model's Q4_0 decode 10% (Q8_0 7%, Q6_K
         // 6%, IQ4_XS 2%, Q4_K_M 1%; an idle 2-core AVX2 EPYC, once the tiles were fast), 4 a thread
         // 6%, 2 a thread 2%: each piece a call with its own setup and its own cold start
  }

  // Output rows [n0, n1) (whole chunks of 16: each in one part) for tokens [t0, t1) of x.
  void linear_rows(const std::vector<CpuQSegment>& segs, const kernels::QActivations& qx, const float* xp,
                   int64_t t0, int64_t t1, int64_t K, int64_t N, const float* b, int64_t n0, int64_t n1,
                   Tensor& out) {
    const kernels::QActivations qt =
        act_quant_ == ActQuantMode::Int8 ? kernels::qactivation_rows(qx, t0, t1) : kernels::QActivations{};
    float* o = out.ptr<float>() + t0 * N;
    for (const CpuQSegment& seg : segs) {
      const int64_t row0 = seg.row0, rows = seg.view.n;
      const int64_t r0 = std::max(n0, row0), r1 = std::min(n1, row0 + rows);
      if (r0 >= r1) continue;
      const float* pb = b ? b + row0 : nullptr;
      if (act_quant_ == ActQuantMode::Int8)
        kernels::qlinear_rows_q8(qt, seg.view, pb, r0 - row0, r1 - row0, o + row0, N);
      else
        kernels::qlinear_rows_f32(xp + t0 * K, t1 - t0, seg.view, pb, r0 - row0, r1 - row0, o + row0, N);
    }
  }

  // One pass over the pool for all the items (a mixture of experts' routed experts): their inputs
  // quantized together (int8 mode), then every item's chunks of 16 output rows split over the
  // threads as one list. Each row's result is what linear() gives it. An act-order weight, or one of
  // parts packed each in its own form, runs alone.
  void run_linear_group(std::span<const GroupedLinear> items) override {
    struct Job {
      const GroupedLinear* g;
      bool quantized;
      kernels::QWeightView view;
      kernels::QActivations qx;
      int64_t T, K, N, row0, chunk0;  // row0 / chunk0: its first row / chunk in the group's lists
      size_t act_offset;
      bool widened;  // its activations' int16 tiles written once (kernels::qlinear_widens_activations)
    };
    constexpr int64_t chunk = 16;
    std::vector<Job> jobs;
    int64_t rows = 0, chunks = 0;
    size_t act_bytes = 0;
    for (const GroupedLinear& g : items) {
      require_support(g.w->format);
      check_f32(g.x, "linear input");
      const int64_t T = g.x.dim(0), K = g.x.dim(1), N = g.w->n;
      LLM_CHECK(g.x.rank() == 2 && K == g.w->k && g.out.dim(0) == T && g.out.dim(1) == N)
          << "linear_group shapes: x " << g.x.shape_str() << " w [" << g.w->n << ", " << g.w->k << "] out "
          << g.out.shape_str();
      const bool quantized = !is_dense(g.w->format);
      std::vector<CpuQSegment> scratch;
      const std::vector<CpuQSegment>* parts = quantized ? &cpu_qweight_parts(*g.w, scratch) : nullptr;
      if (quantized && (!g.w->input_perm.empty() || parts->size() > 1)) {  // on its own
        Tensor out = g.out;
        dispatch_linear(g.x, *g.w, nullptr, out);
        continue;
      }
      LLM_CHECK(quantized || (g.w->data.dtype == dense_dtype(g.w->format) && g.w->data.rank() == 2 &&
                              g.w->data.dim(0) == N && g.w->data.dim(1) == K))
          << "linear_group: a " << weight_format_name(g.w->format) << " weight holds " << dtype_name(g.w->data.dtype)
          << " " << g.w->data.shape_str();
      Job j{&g, quantized, {}, {}, T, K, N, rows, chunks, act_bytes, false};
      if (quantized) j.view = parts->front().view, j.widened = T > 1 && kernels::qlinear_widens_activations(j.view);
      if (quantized && act_quant_ == ActQuantMode::Int8)
        act_bytes += (kernels::qactivation_bytes(T, K, j.widened) + 63) / 64 * 64;
      rows += T;
      chunks += (N + chunk - 1) / chunk;
      jobs.push_back(j);
    }
    if (jobs.empty()) return;
    auto job_of = [&](int64_t at, int64_t Job::*first) {  // the job whose range holds index `at`
      size_t lo = 0, hi = jobs.size();
      while (hi - lo > 1) {
        const size_t mid = (lo + hi) / 2;
        (jobs[mid].*first <= at ? lo : hi) = mid;
      }
      return lo;
    };
    if (act_bytes > 0) {
      if (act_scratch_.size() < act_bytes + 64) act_scratch_.resize(act_bytes + 64);
      const auto at = reinterpret_cast<uintptr_t>(act_scratch_.data());
      uint8_t* base = act_scratch_.data() + (64 - at % 64) % 64;
      for (Job& j : jobs)
        if (j.quantized)  // the view
          j.qx = kernels::quantize_activation_rows(j.g->x.ptr<float>(), j.T, j.K, 0, 0, base + j.act_offset, j.widened);
      pool_.parallel_for(rows, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1;) {
          const Job& j = jobs[job_of(r, &Job::row0)];
          const int64_t end = std::min(r1, j.row0 + j.T);
          if (j.quantized)
            kernels::quantize_activation_rows(j.g->x.ptr<float>(), j.T, j.K, r - j.row0, end - j.row0,
                                              base + j.act_offset, j.widened);
          r = end;
        }
      });
    }
    // A chunk costs its item's rows x K: the pool's pieces (ThreadPool::parallel_for) are contiguous
    // runs of chunks of equal cost (experts take unequal numbers of tokens), not of equal count.
    std::vector<int64_t> cost(size_t(chunks) + 1, 0);  // cost[c]: the chunks before c
    for (const Job& j : jobs)
      for (int64_t c = j.chunk0; c < j.chunk0 + (j.N + chunk - 1) / chunk; ++c)
        cost[size_t(c) + 1] = cost[size_t(c)] + j.T * j.K;
    // Decode-sized items (a few tokens each: a call costs little beside its work) in balanced pieces
    // of many equal-cost parts (4 << kBalanceRounds a thread: the smallest piece still about four);
    // else one part a thread (a prefill tile's call sets up its tokens).
    bool few_tokens = true;
    for (const Job& j : jobs) few_tokens = few_tokens && j.T <= kBalancedTokens;
    const int64_t parts = int64_t(pool_.size()) * (few_tokens ? 4 << kBalanceRounds : 1), total = cost.back();
    std::vector<int64_t> bound(size_t(parts) + 1, chunks);  // part p: chunks [bound[p], bound[p + 1])
    for (int64_t p = 0; p < parts; ++p)  // the first chunk that starts at or past p / parts of the cost
      bound[size_t(p)] = std::lower_bound(cost.begin(), cost.end() - 1, (total * p + parts - 1) / parts,
                                          [](int64_t have, int64_t want) { return have < want; }) - cost.begin();
    pool_.parallel_for(parts, [&](int64_t p0, int64_t p1) {
      const int64_t c0 = bound[size_t(p0)], c1 = bound[size_t(p1)];
      for (int64_t c = c0; c < c1;) {
        const Job& j = jobs[job_of(c, &Job::chunk0)];
        const int64_t end = std::min(c1, j.chunk0 + (j.N + chunk - 1) / chunk);
        const int64_t n0 = (c - j.chunk0) * chunk, n1 = std::min(j.N, (end - j.chunk0) * chunk);
        float* out = static_cast<float*>(j.g->out.data);  // the item's output (the span holds it const)
        const float* x = j.g->x.ptr<float>();
        if (!j.quantized)
          kernels::linear_rows(x, j.T, j.K, j.g->w->data.data, weight_type(j.g->w->data.dtype), nullptr, n0, n1, out,
                               j.N);
        else if (act_quant_ == ActQuantMode::Int8)
          kernels::qlinear_rows_q8(j.qx, j.view, nullptr, n0, n1, out, j.N);
        else
          kernels::qlinear_rows_f32(x, j.T, j.view, nullptr, n0, n1, out, j.N);
        c = end;
      }
    }, few_tokens);
  }

  void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out) override {
    check_f32(x, "linear input");
    const int64_t T = x.dim(0), K = x.dim(1), N = w.dim(0);
    LLM_CHECK(w.dim(1) == K && out.dim(0) == T && out.dim(1) == N)
        << "linear shapes: x " << x.shape_str() << " w " << w.shape_str() << " out " << out.shape_str();
    const float* b = bias ? bias->ptr<float>() : nullptr;
    const auto wt = weight_type(w.dtype);
    // Chunks of 16 output rows keep per-thread work even and the split independent of T.
    const int64_t chunk = 16, chunks = (N + chunk - 1) / chunk;
    pool_.parallel_for(chunks, [&](int64_t c0, int64_t c1) {
      kernels::linear_rows(x.ptr<float>(), T, K, w.data, wt, b, c0 * chunk, std::min(N, c1 * chunk), out.ptr<float>(), N);
    });
  }

  void rope(Tensor& qkv, const DeviceBatch& b, const RopeParams& p, int hq, int hkv) override {
    const int64_t D = p.head_dim, T = qkv.dim(0), W = qkv.dim(1);
    const auto& pos = b.plan->positions;
    pool_.parallel_for(T, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t)  // q and k heads are contiguous: [hq + hkv, D] from the row start
        kernels::rope_heads(qkv.ptr<float>() + t * W, hq + hkv, D, pos[t], p.inv_freq_at(pos[t]), p.rotary(),
                            p.attention_scaling);
    });
  }


  void write_kv(const Tensor& qkv, const DeviceBatch& b, int hq, int hkv, KvLayer& cache) override {
    const int64_t D = cache.k.dim(3), W = qkv.dim(1), row = hkv * D;
    const auto& slots = b.plan->slot_mapping;
    if (cache.quant != KvCacheDtype::Auto) return write_kv_quant(qkv, slots, hq, hkv, cache);
    // a prompt's rows over the pool (each token its own slot): 23 MB for 512 tokens of the default
    // model, which one thread copying left the others waiting
    pool_.parallel_for(int64_t(slots.size()), [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const float* src = qkv.ptr<float>() + t * W + hq * D;
        std::memcpy(cache.k.ptr<float>() + int64_t(slots[size_t(t)]) * row, src, row * 4);
        std::memcpy(cache.v.ptr<float>() + int64_t(slots[size_t(t)]) * row, src + row, row * 4);
      }
    });
  }

  void attention(const Tensor& qkv, const KvLayer& cache, const DeviceBatch& b, int hq, int hkv, float scale,
                 Tensor& out, int window = 0, float softcap = 0.0f) override {
    const BatchPlan& plan = *b.plan;
    const int64_t D = cache.k.dim(3), W = qkv.dim(1);
    kernels::PagedKvView view{cache.k.ptr<float>(), cache.v.ptr<float>(), cache.k.dim(1), hkv, D};
    const bool quant = cache.quant != KvCacheDtype::Auto;
    const kernels::PagedKvQuantView qview = quant ? quant_view(cache, hkv) : kernels::PagedKvQuantView{};
    // The query tokens attended here, sequence by sequence, in units of 4 consecutive tokens of a
    // sequence (one kernel call reads each key row once for the four) and single tokens for the
    // rest. An int8 / fp8 context is read in place (rows dequantized in registers) where a kernel
    // does that; elsewhere each sequence goes to attention_over_copy.
    // With exact open-block rows (an fp8 cache, kv_exact_rows.h), a sequence's queries read their
    // own block from `exact[s]`: a unit of four stays inside one block (the tokens before a block's
    // start go singly); an item's tiles may lie in several blocks (the kernels' exact_froms).
    // A sliding window: each token reads keys [first, position], first = max(0, position - window + 1)
    // (kernels/cpu/attention.h), in place where its keys' count starts in first's own block (blocks
    // of a multiple of 16 slots: the blocks before the window may be gone), else through
    // attention_over_copy. Soft-capped scores (Gemma 2): every kernel soft-caps (the decode stages in
    // their softmax).
    LLM_CHECK(softcap >= 0 && std::isfinite(softcap)) << "attention: softcap " << softcap;
    const int32_t B = int32_t(cache.k.dim(1));
    const std::vector<cpu::StepSeq> exact_seqs = exact_step(qkv, cache, plan, hq);
    std::vector<cpu::StepExactRows>& exact = exact_rows_;  // its gathered rows' buffers kept from call to call
    if (!exact_seqs.empty() && exact.size() < size_t(plan.num_seqs())) exact.resize(size_t(plan.num_seqs()));
    for (cpu::StepExactRows& e : exact) e.k = e.v = nullptr;
    if (!exact_seqs.empty()) cpu::prepare_exact_rows(*cache.exact, exact_seqs, qkv.ptr<float>(), W, hq, exact);
    auto has_exact = [&](int s) { return !exact_seqs.empty() && exact[size_t(s)].k; };
    auto first_key = [&](int32_t position) { return window > 0 ? std::max(0, position - window + 1) : 0; };
    std::vector<cpu::AttentionUnit> units;
    std::vector<int> copy_seqs, singles;
    std::vector<cpu::SplitDecodeToken> split;
    auto split_runs = [&](int s) {
      return quant ? kernels::paged_attention_split_runs(qview.kind, D, has_exact(s))
                   : kernels::paged_attention_split_runs(D);
    };
    for (int s = 0; s < plan.num_seqs(); ++s) {
      const int q0 = plan.query_start[s], q1 = plan.query_start[s + 1];
      const bool slides = q1 > q0 && first_key(*std::max_element(plan.positions.begin() + q0,
                                                                 plan.positions.begin() + q1)) > 0;
      if ((slides && B % 16 != 0) ||
          (quant && !kernels::paged_attention_quant_in_place(qview.kind, D, has_exact(s)))) {
        copy_seqs.push_back(s);
        continue;
      }
      if (q1 - q0 == 1 && split_runs(s)) {
        singles.push_back(s);
        continue;
      }
      int t = q0;
      while (t + 4 <= q1)
        if (has_exact(s) && plan.positions[t] / B != plan.positions[t + 3] / B)  // a tile reads one block's exact rows
          units.push_back({t, 1, s}), ++t;  // singles up to the next block's start
        else
          units.push_back({t, 4, s}), t += 4;
      for (; t < q1; ++t) units.push_back({t, 1, s});
    }
    // A decode token alone in its sequence goes to the stages where they beat its heads run whole
    // beside the step's other whole heads (cpu::split_decode_attention_pays).
    const int64_t whole_items = int64_t(units.size() + singles.size()) * hq;
    for (int s : singles) {
      const int q0 = plan.query_start[s];
      const int32_t keys = plan.positions[q0] + 1 - first_key(plan.positions[q0]);
      const double cost =
          quant ? kernels::paged_attention_split_cost(qview.kind, keys) : kernels::paged_attention_split_cost(keys);
      if (cpu::split_decode_attention_pays(cost, whole_items, pool_.size()))
        split.push_back({q0, plan.block_table.data() + int64_t(s) * plan.max_blocks_per_seq, plan.positions[q0],
                         has_exact(s) ? &exact[size_t(s)] : nullptr, first_key(plan.positions[q0])});
      else
        units.push_back({q0, 1, s});
    }
    if (!copy_seqs.empty())
      attention_over_copy(qkv, cache, plan, copy_seqs, exact, hq, hkv, scale, window, softcap, out);
    if (!split.empty()) {
      if (quant)
        split_attention_.run(pool_, split, qkv.ptr<float>(), W, qview, hq, hkv, scale, out.ptr<float>(), softcap);
      else
        split_attention_.run(pool_, split, qkv.ptr<float>(), W, view, hq, hkv, scale, out.ptr<float>(), softcap);
    }
    const int group = hq / hkv;
    const int64_t max_ctx = plan.max_context_len(), per_query = kernels::paged_attention_scratch(max_ctx);
    const std::vector<cpu::AttentionItem> items =
        cpu::attention_items(units, hq, group, kernels::kPagedAttentionMaxTiles, pool_.size());
    if (!items.empty()) pool_.parallel_for(int64_t(items.size()), [&](int64_t i0, int64_t i1) {
      thread_local std::vector<float> scratch;
      constexpr int kMaxQueries = 4 * kernels::kPagedAttentionMaxTiles;
      if (scratch.size() < size_t(kMaxQueries * per_query)) scratch.resize(size_t(kMaxQueries * per_query));
      for (int64_t i = i0; i < i1; ++i) {
        const cpu::AttentionItem& item = items[size_t(i)];
        const cpu::AttentionUnit& unit = units[size_t(item.unit)];
        const int64_t kvh = item.head / group;
        const int32_t* table = plan.block_table.data() + int64_t(unit.seq) * plan.max_blocks_per_seq;
        const float* q[kMaxQueries];
        float *o[kMaxQueries], *sc[kMaxQueries];
        int32_t pos[kMaxQueries], first[kMaxQueries];
        int queries = 0;  // tiles: unit by unit, a unit's four tokens for each head
        for (int32_t u = item.unit; u < item.unit + item.units; ++u)
          for (int h = item.head; h < item.head + item.heads; ++h)
            for (int j = 0; j < units[size_t(u)].count; ++j, ++queries) {
              const int64_t t = units[size_t(u)].first + j;
              q[queries] = qkv.ptr<float>() + t * W + h * D;
              o[queries] = out.ptr<float>() + t * hq * D + h * D;
              sc[queries] = scratch.data() + queries * per_query;
              pos[queries] = plan.positions[size_t(t)];
              first[queries] = first_key(pos[queries]);
            }
        // Exact rows: from the first tile's block on (the rows of a step's blocks lie one after
        // another, cpu_exact_rows.h); each tile reads its own block's from them, earlier keys from the cache.
        kernels::KvExactRows ex;
        const kernels::KvExactRows* exact_of = nullptr;
        int32_t froms[kernels::kPagedAttentionMaxTiles];
        if (has_exact(unit.seq)) {
          ex = exact[size_t(unit.seq)].for_query(pos[0], B, kvh, D), exact_of = &ex;
          for (int t = 0; 4 * t < queries && unit.count == 4; ++t) froms[t] = pos[4 * t] / B * B;
        }
        const int32_t* firsts = window > 0 ? first : nullptr;
        if (unit.count == 4 &&
            (quant ? kernels::paged_attention_tiles_quant(queries / 4, q, pos, qview, table, kvh, scale, sc, o,
                                                          exact_of, firsts, softcap, exact_of ? froms : nullptr)
                   : kernels::paged_attention_tiles(queries / 4, q, pos, view, table, kvh, scale, sc, o, softcap,
                                                    firsts)))
          continue;
        for (int j = 0; j < queries; ++j) {
          if (has_exact(unit.seq)) ex = exact[size_t(unit.seq)].for_query(pos[j], B, kvh, D);
          if (quant)  // int8 / fp8 rows dequantized in registers
            kernels::paged_attention_head_quant(q[j], qview, table, pos[j], kvh, scale, sc[0], o[j], exact_of,
                                                first[j], softcap);
          else if (softcap > 0)
            kernels::paged_attention_head_softcap(q[j], view, table, pos[j], kvh, scale, softcap, sc[0], o[j],
                                                  first[j]);
          else
            kernels::paged_attention_head(q[j], view, table, pos[j], kvh, scale, sc[0], o[j], first[j]);
        }
      }
    });
    if (!exact_seqs.empty()) cpu::finish_exact_rows(*cache.exact, exact_seqs, qkv.ptr<float>(), W, hq);
  }

  void silu_mul(const Tensor& gate_up, Tensor& out) override {
    gated(gate_up, out, kernels::silu_mul_cols);
  }

  void gelu_tanh_mul(const Tensor& gate_up, Tensor& out) override {
    gated(gate_up, out, kernels::gelu_tanh_mul_cols);
  }

  // out [R, I] = act(gate_up [R, 2I]) by cols(gate_up, I, r0, r1, c0, c1, out): rows over the pool,
  // and where rows are fewer than threads (decode) a wide row's columns too, in runs of kGatedCols:
  // a row's exponentials would otherwise take one thread while the others wait (8,192 of them about
  // 6 us). Each value is computed on its own: the same bits however the work is split.
  template <class Cols>
  void gated(const Tensor& gate_up, Tensor& out, Cols cols) {
    check_f32(gate_up, "gated activation input");
    check_f32(out, "gated activation output");
    const int64_t I = out.dim(-1), R = out.numel() / I;
    LLM_CHECK(gate_up.numel() == 2 * R * I) << "gated activation: input " << gate_up.shape_str() << ", output "
                                            << out.shape_str();
    const float* g = gate_up.ptr<float>();
    float* o = out.ptr<float>();
    if (R >= pool_.size() || I < 2 * kGatedCols) {
      pool_.parallel_for(R, [&](int64_t r0, int64_t r1) { cols(g, I, r0, r1, 0, I, o); });
      return;
    }
    const int64_t per_row = (I + kGatedCols - 1) / kGatedCols;
    pool_.parallel_for(R * per_row, [&](int64_t u0, int64_t u1) {
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t r = u / per_row, c0 = u % per_row * kGatedCols;
        cols(g, I, r, r + 1, c0, std::min(I, c0 + kGatedCols), o);
      }
    });
  }

  void scale(Tensor& x, float s) override {
    check_f32(x, "scale");
    float* p = x.ptr<float>();
    for (int64_t i = 0, n = x.numel(); i < n; ++i) p[i] *= s;
  }

  void soft_cap(Tensor& x, float cap) override {
    check_f32(x, "soft_cap");
    LLM_CHECK(cap > 0 && std::isfinite(cap)) << "soft_cap: cap " << cap;
    float* p = x.ptr<float>();
    pool_.parallel_for(x.numel(), [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) p[i] = cap * std::tanh(p[i] / cap);
    });
  }

  void gather_rows(const Tensor& x, const DeviceBatch& b, Tensor& out) override {
    const int64_t C = x.dim(-1);
    const auto& rows = b.plan->logits_rows;
    for (size_t r = 0; r < rows.size(); ++r)
      std::memcpy(out.ptr<float>() + r * C, x.ptr<float>() + int64_t(rows[r]) * C, C * 4);
  }

  void gather_token_rows(const Tensor& x, std::span<const int32_t> rows, Tensor& out) override {
    check_f32(x, "gather_token_rows");
    const int64_t C = x.dim(-1), T = x.dim(0);
    LLM_CHECK(out.dim(-1) == C && out.dim(0) >= int64_t(rows.size())) << "gather_token_rows: shapes";
    for (size_t i = 0; i < rows.size(); ++i) {
      LLM_CHECK(rows[i] >= 0 && rows[i] < T) << "gather_token_rows: row " << rows[i] << " of " << T;
      std::memcpy(out.ptr<float>() + int64_t(i) * C, x.ptr<float>() + int64_t(rows[i]) * C, size_t(C) * 4);
    }
  }

  void scatter_add_rows(const Tensor& y, std::span<const int32_t> rows, std::span<const float> weights,
                        Tensor& out) override {
    check_f32(y, "scatter_add_rows");
    const int64_t C = out.dim(-1), T = out.dim(0);
    LLM_CHECK(y.dim(-1) == C && y.dim(0) >= int64_t(rows.size()) && weights.size() == rows.size())
        << "scatter_add_rows: shapes";
    for (int32_t r : rows) LLM_CHECK(r >= 0 && r < T) << "scatter_add_rows: row " << r << " of " << T;
    // Each output row takes its additions in the order given, whatever the threads: columns split.
    pool_.parallel_for(C, [&](int64_t c0, int64_t c1) {
      for (size_t i = 0; i < rows.size(); ++i) {
        const float w = weights[i];
        const float* src = y.ptr<float>() + int64_t(i) * C;
        float* dst = out.ptr<float>() + int64_t(rows[i]) * C;
        for (int64_t c = c0; c < c1; ++c) dst[c] += w * src[c];
      }
    });
  }

  void fill_zero(Tensor& t) override { std::memset(t.data, 0, t.nbytes()); }

  void copy_blocks(std::vector<KvLayer>& cache, const std::vector<std::pair<int, int>>& pairs) override {
    for (KvLayer& l : cache) {
      // Int8 caches have per-token scales beside the codes: blocks of those move too (fp8's per-head
      // scales are not per block).
      std::vector<Tensor*> per_block = {&l.k, &l.v};
      if (l.quant == KvCacheDtype::Int8) per_block.insert(per_block.end(), {&l.k_scale, &l.v_scale});
      for (auto [src, dst] : pairs) {
        LLM_CHECK(src >= 0 && dst >= 0 && src < l.k.dim(0) && dst < l.k.dim(0)) << "copy_blocks: bad block id";
        for (Tensor* t : per_block) {
          LLM_CHECK(t->dim(0) == l.k.dim(0)) << "copy_blocks: a per-block tensor of " << t->dim(0) << " blocks";
          const size_t block_bytes = t->nbytes() / size_t(t->dim(0));
          char* base = static_cast<char*>(t->data);
          std::memcpy(base + dst * block_bytes, base + src * block_bytes, block_bytes);
        }
      }
    }
  }

 private:
  // fill(id, row) for each token whose id is in this rank's rows [vocab_begin, vocab_begin + V) of
  // out [T, H] (id relative to vocab_begin); zero rows for the others (another rank's vocabulary:
  // the runner checked the ids). A prompt's tokens over the pool.
  template <class Fill>
  void for_each_embedded(const DeviceBatch& b, Tensor& out, int64_t H, int64_t V, int64_t vocab_begin, Fill fill) {
    check_f32(out, "embed output");
    const auto& ids = b.plan->token_ids;
    for (int32_t id : ids) LLM_CHECK(id >= 0) << "token id " << id << " is negative";
    pool_.parallel_for(int64_t(ids.size()), [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        float* o = out.ptr<float>() + t * H;
        const int64_t id = int64_t(ids[size_t(t)]) - vocab_begin;
        if (id < 0 || id >= V)
          std::fill(o, o + H, 0.0f);
        else
          fill(id, o);
      }
    });
  }

  static kernels::PagedKvQuantView quant_view(const KvLayer& cache, int hkv) {
    return {cache.quant == KvCacheDtype::Int8 ? kernels::KvQuant::Int8 : kernels::KvQuant::Fp8,
            cache.k.data, cache.v.data, cache.k_scale.ptr<float>(), cache.v_scale.ptr<float>(), cache.k.dim(1), hkv,
            cache.k.dim(3)};
  }

  // The step's sequences with an exact slot, where the cache keeps exact rows (none otherwise).
  static std::vector<cpu::StepSeq> exact_step(const Tensor& qkv, const KvLayer& cache, const BatchPlan& plan, int hq) {
    std::vector<cpu::StepSeq> out;
    if (!cache.exact || plan.exact_slot.empty()) return out;
    LLM_CHECK(cache.exact->kv_heads * cache.exact->head_dim * 2 + int64_t(hq) * cache.exact->head_dim == qkv.dim(1))
        << "exact KV rows of another shape than the step's qkv";
    for (int s = 0; s < plan.num_seqs(); ++s) {
      const int q0 = plan.query_start[s], q1 = plan.query_start[s + 1];
      if (plan.exact_slot[size_t(s)] < 0 || q0 == q1) continue;
      const int32_t c0 = plan.positions[size_t(q0)], c1 = plan.context_len[size_t(s)];
      for (int t = q0; t < q1; ++t)  // one run of positions ending at the context: rows map to positions
        LLM_CHECK(plan.positions[size_t(t)] == c0 + (t - q0)) << "exact KV rows need consecutive positions";
      LLM_CHECK(c1 == c0 + (q1 - q0)) << "exact KV rows: the step's tokens must end the context";
      out.push_back({s, plan.exact_slot[size_t(s)], c0, c1, q0});
    }
    return out;
  }

  // Attention of the sequences `seqs` over a contiguous f32 copy of each one's context: for an int8
  // or fp8 cache where no kernel reads it in place (kernels::paged_attention_quant_in_place: the
  // CPU, the head size, the cache dtype), and for a sliding window over blocks whose
  // slots are not a multiple of 16. One sequence at a time: its context is copied (dequantized) once,
  // not once per query token and head; then the f32 kernel runs over the copy as a single block, a
  // token with a window given its first key, so the SIMD kernels run there too. The same results as
  // in place. softcap > 0: paged_attention_head_softcap instead (the SIMD kernels' scores, the
  // portable kernel's cap).
  // With exact rows (exact[s].k set) the queries go block by block, the copy holding the block's
  // exact rows while its queries run.
  void attention_over_copy(const Tensor& qkv, const KvLayer& cache, const BatchPlan& plan,
                           const std::vector<int>& seqs, const std::vector<cpu::StepExactRows>& exact, int hq,
                           int hkv, float scale, int window, float softcap, Tensor& out) {
    const int64_t D = cache.k.dim(3), W = qkv.dim(1), row = int64_t(hkv) * D;
    const int32_t B = int32_t(cache.k.dim(1));
    const bool quant = cache.quant != KvCacheDtype::Auto;
    const kernels::PagedKvQuantView qview = quant ? quant_view(cache, hkv) : kernels::PagedKvQuantView{};
    const int group = hq / hkv;
    const int32_t first_block[1] = {0};
    auto first_key = [&](int32_t position) { return window > 0 ? std::max(0, position - window + 1) : 0; };
    std::vector<float> k, v;
    for (int s : seqs) {
      const int q0 = plan.query_start[s], q1 = plan.query_start[s + 1];
      if (q0 == q1) continue;
      // The copy holds positions [base, end) as rows [0, end - base): base the start of the keys' count
      // (kernels::attention_window_start) of the lowest first key any of its tokens reads, a multiple
      // of 16, so that each token's keys are counted as in place. Positions from `kept`, the start of
      // that key's block, are copied; those before it (a sliding window's blocks before it may be gone;
      // none where blocks are a multiple of 16 slots) are zeros, masked.
      const int32_t end = *std::max_element(plan.positions.begin() + q0, plan.positions.begin() + q1) + 1;
      const int32_t low = *std::min_element(plan.positions.begin() + q0, plan.positions.begin() + q1);
      const int32_t kept = first_key(low) / B * B, base = kernels::attention_window_start(kept), n = end - base;
      k.resize(size_t(n * row));
      v.resize(size_t(n * row));
      std::fill_n(k.begin(), int64_t(kept - base) * row, 0.0f);  // the rest is copied below
      std::fill_n(v.begin(), int64_t(kept - base) * row, 0.0f);
      // block-aligned, so position kept + j reads table[j / B] at offset j % B
      const int32_t* table = plan.block_table.data() + int64_t(s) * plan.max_blocks_per_seq + kept / B;
      float *k_kept = k.data() + int64_t(kept - base) * row, *v_kept = v.data() + int64_t(kept - base) * row;
      auto dequantize = [&](int32_t p0, int32_t p1) {  // positions [p0, p1) (from kept on) into the copy
        const int32_t j0 = p0 - kept;
        pool_.parallel_for(p1 - p0, [&](int64_t a, int64_t b) {
          if (quant)
            return kernels::dequantize_kv_positions(qview, table, int32_t(j0 + a), int32_t(j0 + b), k_kept, v_kept);
          for (int64_t j = j0 + a; j < j0 + b; ++j) {
            const int64_t slot = int64_t(table[j / B]) * B + j % B;
            std::memcpy(k_kept + j * row, cache.k.ptr<float>() + slot * row, size_t(row) * 4);
            std::memcpy(v_kept + j * row, cache.v.ptr<float>() + slot * row, size_t(row) * 4);
          }
        });
      };
      dequantize(kept, end);
      auto run = [&](int t0, int t1) {
        pool_.parallel_for(int64_t(t1 - t0) * hq, [&](int64_t i0, int64_t i1) {
          std::vector<float> scratch(size_t(kernels::paged_attention_scratch(n - 1)));
          const kernels::PagedKvView view{k.data(), v.data(), n, hkv, D};
          for (int64_t i = i0; i < i1; ++i) {
            // heads outer: a thread's consecutive queries read one kv head's rows of the copy
            const int64_t t = t0 + cpu::balanced_order(i % (t1 - t0), t1 - t0), h = i / (t1 - t0);
            const int32_t pos = plan.positions[t] - base, first = first_key(plan.positions[t]) - base;
            const float* q = qkv.ptr<float>() + t * W + h * D;
            float* o = out.ptr<float>() + t * hq * D + h * D;
            if (softcap > 0)
              kernels::paged_attention_head_softcap(q, view, first_block, pos, h / group, scale, softcap,
                                                    scratch.data(), o, first);
            else
              kernels::paged_attention_head(q, view, first_block, pos, h / group, scale, scratch.data(), o, first);
          }
        });
      };
      const cpu::StepExactRows* ex = size_t(s) >= exact.size() || !exact[size_t(s)].k ? nullptr : &exact[size_t(s)];
      if (!ex) {
        run(q0, q1);
        continue;
      }
      for (int t0 = q0; t0 < q1;) {  // the queries of one block (positions are consecutive)
        const int32_t from = plan.positions[t0] / B * B, to = std::min(end, from + B);  // absolute
        const int t1 = std::min(q1, t0 + (to - plan.positions[t0]));
        const int64_t at = int64_t(from - ex->first) * row, count = int64_t(to - from) * row;
        std::copy_n(ex->k + at, count, k.begin() + int64_t(from - base) * row);
        std::copy_n(ex->v + at, count, v.begin() + int64_t(from - base) * row);
        run(t0, t1);
        if (t1 < q1) dequantize(from, to);  // later blocks' queries read this one from the cache
        t0 = t1;
      }
    }
  }

  void write_kv_quant(const Tensor& qkv, const std::vector<int32_t>& slots, int hq, int hkv, KvLayer& cache) {
    const int64_t D = cache.k.dim(3), W = qkv.dim(1), T = int64_t(slots.size());
    const bool int8 = cache.quant == KvCacheDtype::Int8;
    LLM_CHECK(cache.k.dtype == (int8 ? DType::I8 : DType::U8) && cache.k_scale.dtype == DType::F32)
        << "write_kv: a " << kv_cache_dtype_name(cache.quant) << " cache of " << dtype_name(cache.k.dtype);
    pool_.parallel_for(T, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t)
        for (int h = 0; h < hkv; ++h) {
          const int64_t at = int64_t(slots[size_t(t)]) * hkv + h;  // (slot, head) row of the cache
          const float* k = qkv.ptr<float>() + t * W + (hq + h) * D;
          const float* v = k + int64_t(hkv) * D;
          if (int8) {
            kernels::quantize_kv_row_int8(k, D, cache.k.ptr<int8_t>() + at * D, cache.k_scale.ptr<float>() + at * 2);
            kernels::quantize_kv_row_int8(v, D, cache.v.ptr<int8_t>() + at * D, cache.v_scale.ptr<float>() + at * 2);
          } else {
            kernels::quantize_kv_row_fp8(k, D, cache.k_scale.ptr<float>()[h], cache.k.ptr<uint8_t>() + at * D);
            kernels::quantize_kv_row_fp8(v, D, cache.v_scale.ptr<float>()[h], cache.v.ptr<uint8_t>() + at * D);
          }
        }
    });
  }

  ThreadPool pool_;
  ActQuantMode act_quant_;
  std::vector<uint8_t> act_scratch_;  // the int8 activations of the last quantized linear
  std::vector<float> perm_scratch_;   // an act-order weight's input with its columns gathered
  std::vector<int64_t> piece_bounds_;  // the last quantized linear's pieces (cpu_linear_pieces.h)
  // A step's exact KV rows by sequence (attention): a prompt's are gathered into buffers of a few MB,
  // which allocated afresh each layer cost their page faults every time (8.8% of an fp8 prompt).
  std::vector<cpu::StepExactRows> exact_rows_;
  HostArena weight_arena_;  // packed weights under a huge page, on huge pages (host_arena.h)
  cpu::SplitDecodeAttention split_attention_;  // long decode contexts' attention (its scratch kept)
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int num_threads, ActQuantMode act_quant,
                                          const std::optional<CpuKernelOptions>& kernels, bool simulate_threads) {
  if (kernels) {
    try {
      kernels::select_cpu_kernels(kernels->isa, kernels->rows_layout, kernels->prefetch);
      kernels::select_codebook_prefill(kernels->codebook_prefill);
    } catch (const KernelError& e) {  // an ISA this CPU lacks: the user's choice, not a fault
      throw InputError(e.what());
    }
  }
  return std::make_unique<CpuBackend>(num_threads, act_quant, simulate_threads);
}

}  // namespace llmctl
