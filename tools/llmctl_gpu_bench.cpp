// GPU micro-benchmark on the CudaBackend (numbers are reported, never asserted):
//   copy      device-to-device copy bandwidth (bytes read + written)
//   gemm      cuBLAS bf16 GEMM at 8192^3 through Backend::linear
//   attention decode attention, Llama-3-8B heads (Hq 32, Hkv 8, D 128), batch 1/32/128 x context 1024/4096
//   decode    one batch-1 decode step of a Llama-3-8B-shaped stack (random bf16 weights, ~16 GB)
//   prefill   1 x 2048 tokens through the same stack
// Prints one JSON object on stdout and a readable table on stderr. Options: --layers N (default 32),
// --context N (decode-step context, default 1024), --skip-model.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifndef LLMCTL_HAVE_CUDA
int main() {
  std::fprintf(stderr, "llmctl_gpu_bench: built without CUDA\n");
  std::printf("{\"error\": \"built without CUDA\"}\n");
  return 77;
}
#else
#include <algorithm>
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <vector>

#include "engine/backend/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise.cuh"

using namespace llmctl;
using json = nlohmann::json;

namespace {

// Median milliseconds of f() over `reps` runs (after `warmup`), timed with events on the stream.
double median_ms(CudaBackend& be, int warmup, int reps, const std::function<void()>& f) {
  for (int i = 0; i < warmup; ++i) f();
  be.synchronize();
  cudaEvent_t a, b;
  CUDA_CHECK(cudaEventCreate(&a));
  CUDA_CHECK(cudaEventCreate(&b));
  std::vector<float> ts;
  for (int i = 0; i < reps; ++i) {
    CUDA_CHECK(cudaEventRecord(a, be.stream()));
    f();
    CUDA_CHECK(cudaEventRecord(b, be.stream()));
    CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    ts.push_back(ms);
  }
  CUDA_CHECK(cudaEventDestroy(a));
  CUDA_CHECK(cudaEventDestroy(b));
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

uint64_t g_seed = 1;
Tensor random_dev(CudaBackend& be, DType dt, std::vector<int64_t> shape, float scale) {
  Tensor t = be.alloc(dt, std::move(shape));
  cuda::launch_fill_random(t.data, dt, t.numel(), g_seed++, scale, be.stream());
  return t;
}

// S sequences, each with `fresh` new tokens ending at context `ctx`, blocks scattered in the pool.
BatchPlan make_plan(int S, int ctx, int fresh, int B, int* num_blocks, std::mt19937& rng) {
  const int nb = (ctx + B - 1) / B;
  *num_blocks = S * nb;
  std::vector<int32_t> pool(*num_blocks);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  BatchPlan p;
  p.max_blocks_per_seq = nb;
  for (int s = 0; s < S; ++s) {
    for (int i = 0; i < nb; ++i) p.block_table.push_back(pool[size_t(s) * nb + i]);
    for (int pos = ctx - fresh; pos < ctx; ++pos) {
      p.token_ids.push_back((s * 7919 + pos) % 128000);
      p.positions.push_back(pos);
      p.slot_mapping.push_back(p.block_table[size_t(s) * nb + pos / B] * B + pos % B);
    }
    p.query_start.push_back(p.query_start.back() + fresh);
    p.context_len.push_back(ctx);
    p.logits_rows.push_back(p.query_start.back() - 1);
  }
  p.validate(B, *num_blocks);
  return p;
}

struct Shape {  // Llama-3-8B
  int H = 4096, L = 32, I = 14336, V = 128256, Hq = 32, Hkv = 8, D = 128, B = 16;
};

struct Layer {
  Tensor ln1, wqkv, wo, ln2, wgu, wdown;
  KvLayer kv;
};

}  // namespace

int main(int argc, char** argv) try {
  Shape sh;
  int decode_ctx = 1024;
  bool skip_model = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--layers") && i + 1 < argc) sh.L = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--context") && i + 1 < argc) decode_ctx = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--skip-model")) skip_model = true;
    else {
      std::fprintf(stderr, "usage: llmctl_gpu_bench [--layers N] [--context N] [--skip-model]\n");
      return 2;
    }
  }
  if (!cuda_device_available()) {
    std::fprintf(stderr, "llmctl_gpu_bench: no CUDA device\n");
    std::printf("{\"error\": \"no CUDA device\"}\n");
    return 77;
  }
  const DType dt = DType::BF16;
  CudaBackend be(dt, 0);
  std::mt19937 rng(42);
  json out;
  out["device"] = be.name();
  out["dtype"] = dtype_name(dt);
  std::fprintf(stderr, "device: %s\n", be.name().c_str());

  // (a) copy bandwidth
  double copy_gbps = 0;
  {
    const size_t bytes = size_t(1) << 30;
    Tensor a = be.alloc(DType::U8, {int64_t(bytes)}), b = be.alloc(DType::U8, {int64_t(bytes)});
    CUDA_CHECK(cudaMemsetAsync(a.data, 1, bytes, be.stream()));
    const double ms = median_ms(be, 2, 10, [&] {
      CUDA_CHECK(cudaMemcpyAsync(b.data, a.data, bytes, cudaMemcpyDeviceToDevice, be.stream()));
    });
    copy_gbps = 2.0 * bytes / (ms * 1e-3) / 1e9;
    out["copy"] = {{"bytes", bytes}, {"ms", ms}, {"gbps_read_plus_write", copy_gbps}};
    std::fprintf(stderr, "%-34s %9.3f ms  %8.1f GB/s (read+write)\n", "copy 1 GiB d2d", ms, copy_gbps);
  }

  // (b) GEMM peak
  double gemm_tflops = 0;
  {
    const int64_t n = 8192;
    Tensor x = random_dev(be, dt, {n, n}, 1.f), w = random_dev(be, dt, {n, n}, 1.f), y = be.alloc(dt, {n, n});
    const double ms = median_ms(be, 3, 10, [&] { be.linear(x, w, nullptr, y); });
    gemm_tflops = 2.0 * n * n * n / (ms * 1e-3) / 1e12;
    out["gemm"] = {{"m", n}, {"n", n}, {"k", n}, {"ms", ms}, {"tflops", gemm_tflops}};
    std::fprintf(stderr, "%-34s %9.3f ms  %8.1f TFLOP/s\n", "gemm bf16 8192^3", ms, gemm_tflops);
  }

  // (c) decode attention
  {
    json rows = json::array();
    for (int S : {1, 32, 128})
      for (int ctx : {1024, 4096}) {
        int NB = 0;
        BatchPlan plan = make_plan(S, ctx, 1, sh.B, &NB, rng);
        KvLayer kv{random_dev(be, dt, {NB, sh.B, sh.Hkv, sh.D}, 1.f), random_dev(be, dt, {NB, sh.B, sh.Hkv, sh.D}, 1.f)};
        Tensor qkv = random_dev(be, dt, {S, (sh.Hq + 2 * sh.Hkv) * sh.D}, 1.f);
        Tensor o = be.alloc(dt, {S, sh.Hq * sh.D});
        DeviceBatch b = be.prepare_batch(plan);
        const float scale = 1.f / std::sqrt(float(sh.D));
        const double ms = median_ms(be, 3, 20, [&] { be.attention(qkv, kv, b, sh.Hq, sh.Hkv, scale, o); });
        const double bytes = double(S) * ctx * sh.Hkv * sh.D * 2 * 2;  // k + v, bf16
        const double gbps = bytes / (ms * 1e-3) / 1e9;
        rows.push_back({{"batch", S}, {"context", ctx}, {"ms", ms}, {"kv_bytes", bytes}, {"gbps", gbps},
                        {"fraction_of_copy_bw", gbps / copy_gbps}});
        std::fprintf(stderr, "attention decode batch %3d ctx %4d   %9.4f ms  %8.1f GB/s  (%.0f%% of copy)\n", S, ctx,
                     ms, gbps, 100 * gbps / copy_gbps);
      }
    out["decode_attention"] = rows;
  }

  if (!skip_model) {
    // (d) + (e) Llama-3-8B-shaped stack with random weights (scale keeps activations moderate).
    const float ws = 0.02f;
    const int max_ctx = std::max(decode_ctx, 2048);
    const int NB = (max_ctx + sh.B - 1) / sh.B;
    std::vector<Layer> layers(sh.L);
    double weight_bytes = 0;
    auto add = [&](const Tensor& t) { weight_bytes += double(t.nbytes()); };
    Tensor emb = random_dev(be, dt, {sh.V, sh.H}, 1.f), lm_head = random_dev(be, dt, {sh.V, sh.H}, ws);
    Tensor final_norm = random_dev(be, dt, {sh.H}, 1.f);
    const int W = (sh.Hq + 2 * sh.Hkv) * sh.D;
    for (auto& l : layers) {
      l.ln1 = random_dev(be, dt, {sh.H}, 1.f);
      l.ln2 = random_dev(be, dt, {sh.H}, 1.f);
      l.wqkv = random_dev(be, dt, {W, sh.H}, ws);
      l.wo = random_dev(be, dt, {sh.H, sh.Hq * sh.D}, ws);
      l.wgu = random_dev(be, dt, {2 * sh.I, sh.H}, ws);
      l.wdown = random_dev(be, dt, {sh.H, sh.I}, ws);
      l.kv = {random_dev(be, dt, {NB, sh.B, sh.Hkv, sh.D}, 1.f), random_dev(be, dt, {NB, sh.B, sh.Hkv, sh.D}, 1.f)};
      for (const Tensor* t : {&l.ln1, &l.ln2, &l.wqkv, &l.wo, &l.wgu, &l.wdown}) add(*t);
    }
    add(lm_head);
    add(final_norm);
    be.synchronize();
    RopeParams rp;
    rp.head_dim = sh.D;
    for (int i = 0; i < sh.D / 2; ++i) rp.inv_freq.push_back(float(std::pow(500000.0, -2.0 * i / sh.D)));
    const float scale = 1.f / std::sqrt(float(sh.D)), eps = 1e-5f;

    // One forward over a plan; activations sized for its T tokens.
    auto forward = [&](const BatchPlan& plan, const DeviceBatch& batch, int T) {
      const DeviceBatch* bp = &batch;
      Tensor resid = be.alloc(dt, {T, sh.H}), xn = be.alloc(dt, {T, sh.H}), qkv = be.alloc(dt, {T, W});
      Tensor attn = be.alloc(dt, {T, sh.Hq * sh.D}), o = be.alloc(dt, {T, sh.H});
      Tensor gu = be.alloc(dt, {T, 2 * sh.I}), act = be.alloc(dt, {T, sh.I});
      const int R = int(plan.logits_rows.size());
      Tensor last = be.alloc(dt, {R, sh.H}), logits = be.alloc(dt, {R, sh.V});
      return [&, bp, resid, xn, qkv, attn, o, gu, act, last, logits]() mutable {
        const DeviceBatch& b = *bp;
        be.embed(emb, b, resid);
        for (int li = 0; li < sh.L; ++li) {
          Layer& l = layers[li];
          if (li == 0) be.rms_norm(resid, l.ln1, eps, xn, nullptr);
          else be.rms_norm(o, l.ln1, eps, xn, &resid);  // o = previous layer's down projection
          be.linear(xn, l.wqkv, nullptr, qkv);
          be.rope(qkv, b, rp, sh.Hq, sh.Hkv);
          be.write_kv(qkv, b, sh.Hq, sh.Hkv, l.kv);
          be.attention(qkv, l.kv, b, sh.Hq, sh.Hkv, scale, attn);
          be.linear(attn, l.wo, nullptr, o);
          be.rms_norm(o, l.ln2, eps, xn, &resid);
          be.linear(xn, l.wgu, nullptr, gu);
          be.silu_mul(gu, act);
          be.linear(act, l.wdown, nullptr, o);
        }
        be.rms_norm(o, final_norm, eps, xn, &resid);
        be.gather_rows(xn, b, last);
        be.linear(last, lm_head, nullptr, logits);
      };
    };

    {  // (d) batch-1 decode step
      int nb = 0;
      BatchPlan plan = make_plan(1, decode_ctx, 1, sh.B, &nb, rng);
      DeviceBatch b = be.prepare_batch(plan);
      auto step = forward(plan, b, 1);
      const double ms = median_ms(be, 3, 30, step);
      const double kv_bytes = double(sh.L) * decode_ctx * sh.Hkv * sh.D * 2 * 2;
      const double bytes = weight_bytes + kv_bytes;  // embedding row and activations are negligible
      const double gbps = bytes / (ms * 1e-3) / 1e9;
      out["decode_step"] = {{"layers", sh.L},        {"context", decode_ctx}, {"ms_per_token", ms},
                            {"tokens_per_s", 1e3 / ms}, {"bytes", bytes},     {"gbps", gbps},
                            {"fraction_of_copy_bw", gbps / copy_gbps}};
      std::fprintf(stderr, "%-34s %9.3f ms  %8.1f tok/s  %7.1f GB/s (%.0f%% of copy)\n", "decode step batch 1", ms,
                   1e3 / ms, gbps, 100 * gbps / copy_gbps);
    }
    {  // (e) prefill 1 x 2048
      const int T = 2048;
      int nb = 0;
      BatchPlan plan = make_plan(1, T, T, sh.B, &nb, rng);
      DeviceBatch b = be.prepare_batch(plan);
      auto step = forward(plan, b, T);
      const double ms = median_ms(be, 1, 5, step);
      const double lin_params = double(sh.L) * (double(W) * sh.H + double(sh.H) * sh.Hq * sh.D +
                                                2.0 * sh.I * sh.H + double(sh.H) * sh.I);
      const double lin_flops = 2.0 * lin_params * T + 2.0 * double(sh.V) * sh.H;  // lm_head on the last row
      const double attn_flops = double(sh.L) * 2 * 2.0 * (double(T) * (T + 1) / 2) * sh.Hq * sh.D;  // causal QK, PV
      const double tflops = (lin_flops + attn_flops) / (ms * 1e-3) / 1e12;
      out["prefill"] = {{"layers", sh.L},
                        {"tokens", T},
                        {"ms", ms},
                        {"tokens_per_s", T / (ms * 1e-3)},
                        {"linear_flops", lin_flops},
                        {"attention_flops", attn_flops},
                        {"tflops", tflops},
                        {"fraction_of_gemm_peak", tflops / gemm_tflops}};
      std::fprintf(stderr, "%-34s %9.3f ms  %8.0f tok/s  %7.1f TFLOP/s (%.0f%% of gemm peak)\n", "prefill 1 x 2048",
                   ms, T / (ms * 1e-3), tflops, 100 * tflops / gemm_tflops);
    }
    out["weight_bytes"] = weight_bytes;
  }
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "llmctl_gpu_bench: %s\n", e.what());
  return 1;
}
#endif
