// GPU benchmark on the CudaBackend (numbers are reported, never asserted):
//   copy        device-to-device copy bandwidth (bytes read + written)
//   gemm        cuBLAS bf16 GEMM at 8192^3 through Backend::linear
//   attention   decode attention, Llama-3-8B heads (Hq 32, Hkv 8, D 128), batch 1/32/128 x context 1024/4096
//   linear      the 8B decode step's batch-1 linear layers: cuBLAS's default, each GEMV variant, tuned;
//               the same layers over 2048 tokens (tuned), TFLOP/s
//   attention prefill  causal prefill attention of 1 x 512 / 2048 tokens, TFLOP/s
//   nccl        NCCL at world size 1: all-reduce and all-gather at an 8B decode step's sizes
//   decode      decode steps of a Llama-3-8B-shaped Llama model (random bf16 weights, ~16 GB; with
//               --weights int4 its linears int4 group 128 with offsets, as `llmctl quantize --bits 4
//               --asym` writes them, run by the quantized kernels), at batch 1 (--decode-batches for
//               more), replayed from their CUDA graphs as the engine runs them
//   prefill     1 x 2048 tokens through the same model
//   throughput  (--throughput IN/OUT,...) offline runs through the Engine: fixed input and output
//               lengths (EOS ignored), greedy, at each --concurrency (max-num-seqs)
// Prints one JSON object on stdout and a readable table on stderr. Options: --layers N (default 32),
// --context N (decode-step context, default 1024), --skip-model, --model-only (copy, gemm and the
// model: no kernel micro-benchmarks), --weights bf16|int4, --decode-batches 1,8,16,32,
// --throughput 128/128,512/128, --concurrency 1,16,64,256, --prompts-per-seq K (requests = K x
// concurrency, default 2), --enforce-eager, --deterministic.
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
#include <chrono>
#include <cmath>
#include <string>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <vector>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/engine.h"
#include "engine/executor/local_executor.h"
#include "engine/model/random_checkpoint.h"
#include "engine/model/registry.h"
#include "engine/parallel/nccl_comm.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/gemm.cuh"
#include "kernels/cuda/qlinear.cuh"

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

// Token ids stand for themselves ("<id>"): the engine needs a tokenizer to detokenize, and a
// random-weight model has no vocabulary.
class NumberTokenizer final : public Tokenizer {
 public:
  explicit NumberTokenizer(int vocab) : vocab_(vocab) {}
  std::vector<int> encode(std::string_view, bool) const override { return {}; }
  std::string decode(const std::vector<int>& ids, bool) const override {
    std::string out;
    for (int id : ids) out += token_bytes(id);
    return out;
  }
  std::string token_bytes(int id) const override { return "<" + std::to_string(id) + ">"; }
  std::string token_text(int id) const override { return token_bytes(id); }
  int token_to_id(std::string_view) const override { return -1; }
  int vocab_size() const override { return vocab_; }
  bool is_special(int) const override { return false; }
  nlohmann::json to_hf_tokenizer_json() const override { return {}; }

 private:
  int vocab_;
};

// A Llama-3-8B-shaped checkpoint whose tensors are views of one random bf16 buffer (values are
// irrelevant to speed; scale 0.02 keeps activations moderate).
// pool and ones must outlive the checkpoint's upload.
Checkpoint random_8b_checkpoint(const Shape& sh, std::vector<uint16_t>& pool, std::vector<uint16_t>& ones) {
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.f, 0.02f);
  pool.resize(size_t(sh.V) * sh.H);
  for (size_t i = 0; i < pool.size(); ++i) pool[i] = f32_to_bf16(i < (size_t(1) << 20) ? d(rng) : 0.f);
  for (size_t i = size_t(1) << 20; i < pool.size(); ++i) pool[i] = pool[i & ((size_t(1) << 20) - 1)];
  ones.assign(size_t(sh.H), f32_to_bf16(1.f));  // norm weights
  Checkpoint ck;
  ModelConfig& c = ck.config;
  c.hidden_size = sh.H;
  c.num_layers = sh.L;
  c.num_heads = sh.Hq;
  c.num_kv_heads = sh.Hkv;
  c.head_dim = sh.D;
  c.intermediate_size = sh.I;
  c.vocab_size = sh.V;
  c.max_position_embeddings = 8192;
  c.rope_theta = 500000.f;
  c.rms_norm_eps = 1e-5f;
  c.tie_word_embeddings = false;
  // Every tensor a view of the random pool (the embedding is the largest), norms of the ones.
  for (const WeightSpec& spec : model_tensor_specs(c))
    ck.tensors[spec.name] = Tensor::view(spec.norm ? ones.data() : pool.data(), DType::BF16, spec.shape);
  return ck;
}

// The checkpoint's layer linears int4, group `group`, with offsets, in place of their bf16 views:
// deferred entries whose codes repeat one random pool, decoded as the loader reaches each and freed
// once uploaded. Scale 2^-9 and offset -2^-6 (exact in f16, so the backend keeps f16 scales, as a
// real checkpoint's) give weights in [-0.016, 0.014]. Embedding and lm_head stay bf16, as `llmctl
// quantize` leaves them.
void quantize_linears(Checkpoint& ck, int group) {
  auto pool = std::make_shared<std::vector<uint8_t>>(size_t(1) << 20);
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> code(0, 15);
  for (uint8_t& c : *pool) c = uint8_t(code(rng));
  const std::string suffix = "_proj.weight";
  for (auto it = ck.tensors.begin(); it != ck.tensors.end();) {
    const std::string& name = it->first;
    const bool linear = name.rfind("model.layers.", 0) == 0 && name.size() > suffix.size() &&
                        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    if (!linear) {
      ++it;
      continue;
    }
    const int64_t n = it->second.dim(0), k = it->second.dim(1);
    ck.quantized[name] = QuantizedEntry::deferred("random int4 " + name, n, k, [n, k, group, pool] {
      quant::GroupAffineWeight w;
      w.bits = 4;
      w.n = n;
      w.k = k;
      w.group = group;
      w.codes.resize(size_t(n * k));
      for (size_t i = 0; i < w.codes.size(); i += pool->size())
        std::memcpy(w.codes.data() + i, pool->data(), std::min(pool->size(), w.codes.size() - i));
      w.scale.assign(size_t(n * (k / group)), 0.001953125f);
      w.offset.assign(w.scale.size(), -0.015625f);
      return w;
    });
    it = ck.tensors.erase(it);
  }
  ck.release_after_upload = true;
}

std::vector<int> parse_ints(const std::string& s) {
  std::vector<int> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    out.push_back(std::atoi(s.substr(i, j - i).c_str()));
    i = j + 1;
  }
  return out;
}

// One offline run through the Engine: `num` requests of `in` random prompt tokens, `out` generated
// tokens each (greedy, EOS ignored), at most `conc` sequences per step.
json throughput_run(Executor& m, const Tokenizer& tok, int in, int out, int conc, int num) {
  EngineConfig ec;
  ec.sched.max_num_seqs = conc;
  ec.sched.max_num_batched_tokens = std::max(2048, in);
  ec.gpu_memory_utilization = 0.9;
  Engine engine(m, tok, ec);
  std::mt19937 rng(uint32_t(in * 131 + out * 7 + conc));
  SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = out;
  sp.ignore_eos = true;
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < num; ++r) {
    std::vector<int> prompt(static_cast<size_t>(in));
    for (int& t : prompt) t = int(rng() % 128000);
    engine.submit(std::move(prompt), sp);
  }
  engine.drain();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const EngineStats st = engine.stats();
  json j = {{"input_len", in},
            {"output_len", out},
            {"concurrency", conc},
            {"requests", num},
            {"seconds", secs},
            {"requests_per_s", num / secs},
            {"output_tokens_per_s", double(st.generated_tokens) / secs},
            {"total_tokens_per_s", double(st.generated_tokens + st.prompt_tokens) / secs},
            {"generated_tokens", st.generated_tokens},
            {"steps", st.steps},
            {"preemptions", st.preemptions},
            {"peak_kv_usage", st.usage_peak},
            {"device_seconds_in_steps", st.device_seconds},
            {"gpu_busy_fraction", st.device_seconds / secs},
            {"kv_blocks", engine.num_blocks()}};
  std::fprintf(stderr, "throughput %4d/%-4d conc %3d: %4d req in %7.2f s  %7.2f req/s  %8.1f out tok/s  %8.1f tok/s  "
               "(%lld preemptions, peak KV %.0f%%, GPU busy in steps %.0f%% of the time)\n",
               in, out, conc, num, secs, num / secs, double(st.generated_tokens) / secs,
               double(st.generated_tokens + st.prompt_tokens) / secs, (long long)st.preemptions, 100 * st.usage_peak,
               100 * st.device_seconds / secs);
  return j;
}

// Median ms of one Backend::attention call over S sequences, each with `fresh` new tokens ending at
// context ctx (random q, k and v, blocks scattered in the pool).
// kv_dtype int8 / fp8: a quantized cache of arbitrary codes and zero scales (timing only).
double attention_ms(CudaBackend& be, const Shape& sh, DType dt, int S, int ctx, int fresh, int warmup, int reps,
                    std::mt19937& rng, KvCacheDtype kv_dtype = KvCacheDtype::Auto) {
  int NB = 0;
  BatchPlan plan = make_plan(S, ctx, fresh, sh.B, &NB, rng);
  KvLayer kv;
  if (kv_dtype == KvCacheDtype::Auto) {
    kv = KvLayer{random_dev(be, dt, {NB, sh.B, sh.Hkv, sh.D}, 1.f), random_dev(be, dt, {NB, sh.B, sh.Hkv, sh.D}, 1.f)};
  } else {
    const bool int8 = kv_dtype == KvCacheDtype::Int8;
    kv.quant = kv_dtype;
    for (Tensor* t : {&kv.k, &kv.v}) {
      *t = be.alloc(int8 ? DType::I8 : DType::U8, {NB, sh.B, sh.Hkv, sh.D});
      CUDA_CHECK(cudaMemsetAsync(t->data, 0x11, t->nbytes(), be.stream()));
    }
    for (Tensor* t : {&kv.k_scale, &kv.v_scale}) {
      *t = int8 ? be.alloc(DType::F32, {NB, sh.B, sh.Hkv, 2}) : be.alloc(DType::F32, {sh.Hkv});
      CUDA_CHECK(cudaMemsetAsync(t->data, 0, t->nbytes(), be.stream()));
    }
  }
  Tensor qkv = random_dev(be, dt, {int64_t(S) * fresh, (sh.Hq + 2 * sh.Hkv) * sh.D}, 1.f);
  Tensor o = be.alloc(dt, {int64_t(S) * fresh, sh.Hq * sh.D});
  DeviceBatch b = be.prepare_batch(plan);
  const float scale = 1.f / std::sqrt(float(sh.D));
  return median_ms(be, warmup, reps, [&] { be.attention(qkv, kv, b, sh.Hq, sh.Hkv, scale, o); });
}

}  // namespace

int main(int argc, char** argv) try {
  Shape sh;
  int decode_ctx = 1024, per_seq = 2;
  bool skip_model = false, model_only = false, int4 = false;
  std::string throughput, concurrency = "1,16,64,256", decode_batches = "1";
  CudaOptions copts;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--layers") && i + 1 < argc) sh.L = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--context") && i + 1 < argc) decode_ctx = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--skip-model")) skip_model = true;
    else if (!std::strcmp(argv[i], "--model-only")) model_only = true;
    else if (!std::strcmp(argv[i], "--weights") && i + 1 < argc && !std::strcmp(argv[i + 1], "int4")) int4 = true, ++i;
    else if (!std::strcmp(argv[i], "--weights") && i + 1 < argc && !std::strcmp(argv[i + 1], "bf16")) ++i;
    else if (!std::strcmp(argv[i], "--decode-batches") && i + 1 < argc) decode_batches = argv[++i];
    else if (!std::strcmp(argv[i], "--throughput") && i + 1 < argc) throughput = argv[++i];
    else if (!std::strcmp(argv[i], "--concurrency") && i + 1 < argc) concurrency = argv[++i];
    else if (!std::strcmp(argv[i], "--prompts-per-seq") && i + 1 < argc) per_seq = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--enforce-eager")) copts.graphs = false;
    else if (!std::strcmp(argv[i], "--deterministic")) copts.deterministic = true;
    else {
      std::fprintf(stderr, "usage: llmctl_gpu_bench [--layers N] [--context N] [--skip-model] [--model-only] "
                   "[--weights bf16|int4] [--decode-batches B,...] [--throughput IN/OUT,...] [--concurrency C,...] "
                   "[--prompts-per-seq K] [--enforce-eager] [--deterministic]\n");
      return 2;
    }
  }
  if (!cuda_device_available()) {
    std::fprintf(stderr, "llmctl_gpu_bench: no CUDA device\n");
    std::printf("{\"error\": \"no CUDA device\"}\n");
    return 77;
  }
  const DType dt = DType::BF16;
  CudaBackend be(dt, 0, copts);
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
  if (!model_only) {
    json rows = json::array();
    for (int S : {1, 32, 128})
      for (int ctx : {1024, 4096}) {
        const double ms = attention_ms(be, sh, dt, S, ctx, 1, 3, 20, rng);
        const double bytes = double(S) * ctx * sh.Hkv * sh.D * 2 * 2;  // k + v, bf16
        const double gbps = bytes / (ms * 1e-3) / 1e9;
        rows.push_back({{"batch", S}, {"context", ctx}, {"ms", ms}, {"kv_bytes", bytes}, {"gbps", gbps},
                        {"fraction_of_copy_bw", gbps / copy_gbps}});
        std::fprintf(stderr, "attention decode batch %3d ctx %4d   %9.4f ms  %8.1f GB/s  (%.0f%% of copy)\n", S, ctx,
                     ms, gbps, 100 * gbps / copy_gbps);
      }
    out["decode_attention"] = rows;
    // The same over int8 / fp8 caches, whose codes the kernel reads in place
    // (kernels/cuda/kv_codes.cuh): about half the bf16 cache's bytes (int8 adds 8 per head row).
    json qrows = json::array();
    for (KvCacheDtype kd : {KvCacheDtype::Int8, KvCacheDtype::Fp8})
      for (int S : {1, 32})
        for (int ctx : {1024, 4096}) {
          const double ms = attention_ms(be, sh, dt, S, ctx, 1, 3, 20, rng, kd);
          const double base = attention_ms(be, sh, dt, S, ctx, 1, 3, 20, rng);
          qrows.push_back({{"kv_dtype", kv_cache_dtype_name(kd)}, {"batch", S}, {"context", ctx}, {"ms", ms},
                           {"bf16_ms", base}, {"slowdown_vs_bf16", ms / base}});
          std::fprintf(stderr, "attention decode kv %-4s batch %3d ctx %4d %9.4f ms  (bf16 %.4f ms, x%.2f)\n",
                       kv_cache_dtype_name(kd), S, ctx, ms, base, ms / base);
        }
    out["decode_attention_quantized_kv"] = qrows;
  }

  // (c2) the batch-1 linear layers of a decode step: cuBLAS's default choice, each GEMV variant, and
  // what the tuner picked (be.linear), as weight bytes read per second.
  if (!model_only) {
    json rows = json::array(), prefill_rows = json::array();
    struct Lin {
      const char* name;
      int64_t N, K;
      DType out;
    };
    const Lin lins[] = {{"qkv", (sh.Hq + 2 * sh.Hkv) * sh.D, sh.H, dt}, {"o", sh.H, sh.Hq * sh.D, dt},
                        {"gate_up", 2 * int64_t(sh.I), sh.H, dt}, {"down", sh.H, sh.I, dt},
                        {"lm_head", sh.V, sh.H, DType::F32}};
    for (const Lin& l : lins) {
      Tensor x = random_dev(be, dt, {1, l.K}, 1.f), w = random_dev(be, dt, {l.N, l.K}, 0.02f);
      Tensor y = be.alloc(l.out, {1, l.N});
      const cuda::GemmParams gp{x.data, w.data, y.data, dt, l.out, 1, l.N, l.K};
      const double bytes = double(l.N) * l.K * 2;
      json row = {{"layer", l.name}, {"n", l.N}, {"k", l.K}, {"weight_bytes", bytes}};
      const auto record = [&](const std::string& path, double ms) {
        const double gbps = bytes / (ms * 1e-3) / 1e9;
        row[path] = {{"ms", ms}, {"gbps", gbps}, {"fraction_of_copy_bw", gbps / copy_gbps}};
        std::fprintf(stderr, "linear T=1 %-8s %-10s %9.4f ms  %8.1f GB/s  (%.0f%% of copy)\n", l.name, path.c_str(), ms,
                     gbps, 100 * gbps / copy_gbps);
      };
      record("cublas", median_ms(be, 3, 20, [&] { cuda::gemm(be.cublas(), gp); }));
      for (int rows_per_block : cuda::kGemvVariants)
        record("gemv" + std::to_string(rows_per_block),
               median_ms(be, 3, 20, [&] { cuda::gemv(gp, rows_per_block, be.stream()); }));
      record("tuned", median_ms(be, 3, 20, [&] { be.linear(x, w, nullptr, y); }));
      rows.push_back(row);
      // The same layer over a 2048-token prefill chunk (tuned path): compute-bound.
      const int64_t T = 2048;
      Tensor xp = random_dev(be, dt, {T, l.K}, 1.f), yp = be.alloc(l.out, {T, l.N});
      const double ms = median_ms(be, 2, 10, [&] { be.linear(xp, w, nullptr, yp); });
      const double tflops = 2.0 * T * l.N * l.K / (ms * 1e-3) / 1e12;
      prefill_rows.push_back({{"layer", l.name}, {"tokens", T}, {"n", l.N}, {"k", l.K}, {"ms", ms}, {"tflops", tflops},
                              {"fraction_of_gemm_peak", tflops / gemm_tflops}});
      std::fprintf(stderr, "linear T=%lld %-8s %9.4f ms  %8.1f TFLOP/s (%.0f%% of gemm peak)\n", (long long)T, l.name,
                   ms, tflops, 100 * tflops / gemm_tflops);
    }
    out["decode_linear"] = rows;
    out["prefill_linear"] = prefill_rows;
  }

  // (c4) W4A16: the int4 group-128 quantized linear (kernels/cuda/qlinear.cu) on Llama-3-8B shapes at
  // decode batch sizes, beside the bf16 linear (tuned path) of the same shape: microseconds, GB/s over
  // the 4-bit codes, speed-up.
  if (!model_only) {
    json rows = json::array();
    struct QLin {
      const char* name;
      int64_t N, K;
    };
    const QLin qlins[] = {{"o", 4096, 4096}, {"qkv", 6144, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}};
    for (const QLin& l : qlins) {
      const int group = 128;
      LinearWeight c;
      c.format = WeightFormat::Int4Group;
      c.n = l.N;
      c.k = l.K;
      c.group_size = group;
      c.data = Tensor::empty_host(DType::U8, {l.N, l.K});
      std::uniform_int_distribution<int> code(0, 15);
      for (int64_t i = 0; i < l.N * l.K; ++i) c.data.ptr<uint8_t>()[i] = uint8_t(code(rng));
      {
        Tensor sf = Tensor::empty_host(DType::F32, {l.N, l.K / group});
        Tensor zf = Tensor::empty_host(DType::F32, {l.N, l.K / group});
        std::uniform_real_distribution<float> u(0.001f, 0.004f);
        for (int64_t i = 0; i < sf.numel(); ++i) sf.ptr<float>()[i] = u(rng), zf.ptr<float>()[i] = -8 * u(rng);
        c.scales = convert_host(sf, DType::F16);
        c.zeros = convert_host(zf, DType::F16);
      }
      const LinearWeight qw = be.upload_quantized(c);
      Tensor wd = random_dev(be, dt, {l.N, l.K}, 0.02f);
      const double qbytes = double(l.N) * l.K / 2;
      for (int64_t T : {1, 8, 16, 32}) {
        Tensor x = random_dev(be, dt, {T, l.K}, 1.f), y = be.alloc(dt, {T, l.N});
        const double q_ms = median_ms(be, 3, 20, [&] { be.linear(x, qw, nullptr, y); });
        const double d_ms = median_ms(be, 3, 20, [&] { be.linear(x, wd, nullptr, y); });
        // Each kernel on its own, to place the switch between them (cuda::kQLinearSmallT).
        cuda::QLinearParams qp;
        qp.x = x.data;
        qp.x_dtype = dt;
        qp.packed = static_cast<const uint8_t*>(qw.data.data);
        qp.bits = 4;
        qp.group = group;
        qp.scale = qw.scales.data;
        qp.offset = qw.zeros.data;
        qp.scale_dtype = qw.scales.dtype;
        qp.out = y.data;
        qp.out_dtype = dt;
        qp.T = T;
        qp.N = l.N;
        qp.K = l.K;
        const double cores_ms = median_ms(be, 3, 20, [&] { cuda::qlinear(qp, be.stream()); });
        const double mma_ms = median_ms(be, 3, 20, [&] { cuda::qlinear_mma(qp, be.stream()); });
        const double gbps = qbytes / (q_ms * 1e-3) / 1e9;
        rows.push_back({{"layer", l.name}, {"n", l.N}, {"k", l.K}, {"group", group}, {"batch", T},
                        {"int4_us", q_ms * 1e3}, {"int4_gbps", gbps}, {"bf16_us", d_ms * 1e3},
                        {"speedup_vs_bf16", d_ms / q_ms}, {"fraction_of_copy_bw", gbps / copy_gbps},
                        {"cuda_cores_us", cores_ms * 1e3}, {"tensor_cores_us", mma_ms * 1e3}});
        std::fprintf(stderr,
                     "w4a16 g128 %-8s %5lldx%-5lld T=%-3lld %9.1f us  %7.1f GB/s (4-bit)  bf16 %9.1f us  x%.2f  "
                     "(cores %.1f us, mma %.1f us)\n",
                     l.name, (long long)l.N, (long long)l.K, (long long)T, q_ms * 1e3, gbps, d_ms * 1e3, d_ms / q_ms,
                     cores_ms * 1e3, mma_ms * 1e3);
      }
    }
    out["w4a16_linear"] = rows;
  }

  // (c3) causal prefill attention of one sequence (tensor-core kernel), Llama-3-8B heads.
  if (!model_only) {
    json rows = json::array();
    for (int T : {512, 2048}) {
      const double ms = attention_ms(be, sh, dt, 1, T, T, 2, 10, rng);
      const double flops = 2 * 2.0 * (double(T) * (T + 1) / 2) * sh.Hq * sh.D;  // causal Q K^T and P V
      const double tflops = flops / (ms * 1e-3) / 1e12;
      rows.push_back({{"tokens", T}, {"ms", ms}, {"tflops", tflops}, {"fraction_of_gemm_peak", tflops / gemm_tflops}});
      std::fprintf(stderr, "attention prefill 1 x %-5d          %9.4f ms  %8.1f TFLOP/s (%.0f%% of gemm peak)\n", T, ms,
                   tflops, 100 * tflops / gemm_tflops);
    }
    out["prefill_attention"] = rows;
  }

  // (c5) NCCL at world size 1 (one GPU: a real one-rank communicator, as LLMCTL_NCCL_WORLD1=1 runs
  // the model), at the sizes one 8B decode step of batch B uses under tensor parallelism: the f32
  // residual all-reduce [B, 4096] (65 a step) and the f32 logits all-gather [B, 128256]. With one rank
  // this is the call's own cost (launch, NCCL's bookkeeping), the floor under any multi-GPU figure.
  if (!model_only) {
    json rows = json::array();
    try {
      std::unique_ptr<Comm> comm = make_nccl_comm(nullptr, be);
      for (int B : {1, 8, 64, 256}) {
        Tensor h = random_dev(be, DType::F32, {B, sh.H}, 1.f);
        Tensor l = random_dev(be, DType::F32, {B, sh.V}, 1.f), lo = be.alloc(DType::F32, {B, sh.V});
        const double ar = median_ms(be, 5, 50, [&] { comm->all_reduce_sum(h); });
        const double ag = median_ms(be, 5, 50, [&] { comm->all_gather_cols(l, lo); });
        rows.push_back({{"batch", B}, {"all_reduce_bytes", B * sh.H * 4}, {"all_reduce_us", ar * 1e3},
                        {"all_gather_bytes", int64_t(B) * sh.V * 4}, {"all_gather_us", ag * 1e3}});
        std::fprintf(stderr, "nccl world 1 batch %-3d all-reduce %7lld B %8.2f us   all-gather %9lld B %8.2f us\n", B,
                     (long long)B * sh.H * 4, ar * 1e3, (long long)B * sh.V * 4, ag * 1e3);
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "nccl world 1: %s\n", e.what());
      rows.push_back({{"error", e.what()}});
    }
    out["nccl_world1"] = rows;
  }

  if (!skip_model) {
    // (d) + (e) + (f): a Llama-3-8B-shaped Llama model, run as the engine runs it (one ModelRunner).
    std::vector<uint16_t> pool, ones;
    Checkpoint ck = random_8b_checkpoint(sh, pool, ones);
    if (int4) quantize_linears(ck, 128);
    std::unique_ptr<Model> model = make_model(ck, be, dt);
    LocalExecutor exec(*model);
    ModelRunner& runner = exec.runner();
    std::vector<uint16_t>().swap(pool);
    const int W = (sh.Hq + 2 * sh.Hkv) * sh.D;
    const double lin_params = double(sh.L) * (double(W) * sh.H + double(sh.H) * sh.Hq * sh.D + 2.0 * sh.I * sh.H +
                                              double(sh.H) * sh.I);
    // Bytes a decode step reads: the linears (int4: half a byte a weight and an f16 scale and offset
    // per 128), lm_head in bf16; one embedding row.
    const double lin_bytes_per_param = int4 ? 0.5 + 4.0 / 128 : 2.0;
    const double weight_bytes = lin_bytes_per_param * lin_params + 2.0 * double(sh.V) * sh.H;
    out["weights"] = int4 ? "int4 g128 (linears), bf16 (embedding, lm_head)" : "bf16";
    json steps = json::array();
    for (int S : parse_ints(decode_batches)) {  // (d) decode steps
      int nb = 0;
      BatchPlan plan = make_plan(S, decode_ctx, 1, sh.B, &nb, rng);
      runner.alloc_kv_cache(runner.kv_spec(sh.B), nb);
      const double ms = median_ms(be, 3, 30, [&] { runner.execute(plan); });
      runner.free_kv_cache();
      const double kv_bytes = double(S) * sh.L * decode_ctx * sh.Hkv * sh.D * 2 * 2;
      const double bytes = weight_bytes + kv_bytes;
      const double gbps = bytes / (ms * 1e-3) / 1e9;
      json row = {{"layers", sh.L}, {"batch", S},     {"context", decode_ctx},
                  {"ms_per_step", ms}, {"tokens_per_s", S * 1e3 / ms}, {"bytes", bytes},
                  {"gbps", gbps},      {"fraction_of_copy_bw", gbps / copy_gbps}, {"graphs", copts.graphs}};
      steps.push_back(row);
      if (S == 1) {  // the batch-1 figure under its earlier name
        row["ms_per_token"] = ms;
        out["decode_step"] = row;
      }
      std::fprintf(stderr, "decode step batch %-3d %-12s %9.3f ms  %8.1f tok/s  %7.1f GB/s (%.0f%% of copy)\n", S,
                   int4 ? "int4" : "bf16", ms, S * 1e3 / ms, gbps, 100 * gbps / copy_gbps);
    }
    out["decode_steps"] = steps;
    {  // (e) prefill 1 x 2048
      const int T = 2048;
      int nb = 0;
      BatchPlan plan = make_plan(1, T, T, sh.B, &nb, rng);
      runner.alloc_kv_cache(runner.kv_spec(sh.B), nb);
      const double ms = median_ms(be, 1, 5, [&] { runner.execute(plan); });
      runner.free_kv_cache();
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
    if (!throughput.empty()) {  // (f)
      NumberTokenizer tok(sh.V);
      json rows = json::array();
      size_t i = 0;
      while (i < throughput.size()) {
        size_t j = throughput.find(',', i);
        if (j == std::string::npos) j = throughput.size();
        const std::string item = throughput.substr(i, j - i);
        i = j + 1;
        const size_t slash = item.find('/');
        if (slash == std::string::npos) throw std::runtime_error("--throughput wants IN/OUT pairs, got " + item);
        const int in = std::atoi(item.substr(0, slash).c_str()), outl = std::atoi(item.substr(slash + 1).c_str());
        for (int c : parse_ints(concurrency)) rows.push_back(throughput_run(exec, tok, in, outl, c, std::max(2, per_seq * c)));
      }
      out["throughput"] = rows;
    }
  }
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "llmctl_gpu_bench: %s\n", e.what());
  return 1;
}
#endif
