// CPU decode-attention microbenchmark (numbers are reported, never asserted): one decode token's
// attention over a paged cache, by the two paths the CPU backend chooses between -- each query head
// one item of the pool (kernels::paged_attention_head, as CpuBackend::attention runs it) and the
// three stages over keys and columns (cpu::SplitDecodeAttention) -- for f32, int8 and fp8 caches,
// at several context lengths and thread counts. The outputs of the two are the same bits (the unit
// tests check it); only the time differs. Beside each measurement: kernels::paged_attention_split_cost's
// curve (measured in the engine's decode steps) and the backend's choice from it
// (cpu::split_decode_attention_pays, the token alone in its step).
// Memory as in a decode step: --layers caches (blocks of 16 slots, shuffled, each slot all kv heads'
// rows) read in turn, and between two calls the pool reads --stream-mb MB of other memory (a layer's
// weights), so a layer's rows come from memory while the paths' own small buffers stay cached.
// Prints per (cache, keys, threads): the median microseconds of a call by each path, their ratio, the
// curve's cost and the choice; then a prompt's tiles of four query tokens, --tiles of them a call
// (kernels::paged_attention_tiles), at each context length (int8 and f32).
// Options: --threads 1,2  --keys 128,256,512,1024,2048  --heads 9  --kv-heads 3  --head-dim 64
//          --kv f32,int8,fp8  --calls 300  --layers 30  --stream-mb 3  --cpu-isa ISA  --tiles 1,8
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backend/cpu/cpu_split_attention.h"
#include "engine/core/thread_pool.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/kv_quant.h"
#include "kernels/cpu/qlinear.h"

using namespace llmctl;

namespace {

std::vector<std::string> split_list(const char* s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) v.push_back(item);
  return v;
}

std::vector<int> int_list(const char* s) {
  std::vector<int> v;
  for (const auto& item : split_list(s)) v.push_back(std::atoi(item.c_str()));
  return v;
}

std::vector<float> randn(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// A cache of `blocks` blocks of 16 slots x hkv heads x D, in f32 and as the int8 / fp8 caches hold it.
struct Cache {
  static constexpr int64_t kBlock = 16;
  int64_t hkv, D;
  std::vector<int32_t> table;
  std::vector<float> k, v;
  std::vector<uint8_t> kc8, vc8, kcf, vcf;
  std::vector<float> ksz, vsz, kscale, vscale;  // int8: (scale, zero) per slot and head; fp8: one per head

  Cache(int64_t blocks, int64_t hkv_, int64_t D_)
      : hkv(hkv_), D(D_), table(size_t(blocks)), k(randn(size_t(blocks * kBlock * hkv_ * D_), 1)),
        v(randn(k.size(), 2)), kc8(k.size()), vc8(k.size()), kcf(k.size()), vcf(k.size()),
        ksz(k.size() / size_t(D_) * 2), vsz(ksz.size()), kscale(size_t(hkv_), 0.02f), vscale(size_t(hkv_), 0.02f) {
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), std::mt19937(3));
    for (size_t at = 0; at < k.size() / size_t(D); ++at) {
      const size_t o = at * size_t(D);
      kernels::quantize_kv_row_int8(&k[o], D, reinterpret_cast<int8_t*>(&kc8[o]), &ksz[2 * at]);
      kernels::quantize_kv_row_int8(&v[o], D, reinterpret_cast<int8_t*>(&vc8[o]), &vsz[2 * at]);
      kernels::quantize_kv_row_fp8(&k[o], D, kscale[0], &kcf[o]);
      kernels::quantize_kv_row_fp8(&v[o], D, vscale[0], &vcf[o]);
    }
  }
  kernels::PagedKvView f32() const { return {k.data(), v.data(), kBlock, hkv, D}; }
  kernels::PagedKvQuantView quant(bool int8) const {
    if (int8) return {kernels::KvQuant::Int8, kc8.data(), vc8.data(), ksz.data(), vsz.data(), kBlock, hkv, D};
    return {kernels::KvQuant::Fp8, kcf.data(), vcf.data(), kscale.data(), vscale.data(), kBlock, hkv, D};
  }
};

// Each query head one item, one piece a thread: CpuBackend::attention's loop for a single token.
template <class View>
void per_head(ThreadPool& pool, const View& c, const int32_t* table, const float* q, int hq, int hkv, int32_t position,
              float* out) {
  const int64_t D = c.head_dim, group = hq / hkv;
  pool.parallel_for(hq, [&](int64_t h0, int64_t h1) {
    std::vector<float> scratch(size_t(kernels::paged_attention_scratch(position)));
    for (int64_t h = h0; h < h1; ++h) {
      if constexpr (std::is_same_v<View, kernels::PagedKvView>)
        kernels::paged_attention_head(q + h * D, c, table, position, h / group, 0.125f, scratch.data(), out + h * D);
      else
        kernels::paged_attention_head_quant(q + h * D, c, table, position, h / group, 0.125f, scratch.data(),
                                            out + h * D);
    }
  });
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> threads = {1, 2}, keys = {128, 256, 512, 1024, 2048}, tile_counts = {1, 8};
  std::vector<std::string> kinds = {"f32", "int8", "fp8"};
  int hq = 9, hkv = 3, D = 64, calls = 300, layers = 30;
  double stream_mb = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--threads") threads = int_list(argv[i + 1]);
    else if (a == "--keys") keys = int_list(argv[i + 1]);
    else if (a == "--tiles") tile_counts = int_list(argv[i + 1]);
    else if (a == "--heads") hq = std::atoi(argv[i + 1]);
    else if (a == "--kv-heads") hkv = std::atoi(argv[i + 1]);
    else if (a == "--head-dim") D = std::atoi(argv[i + 1]);
    else if (a == "--kv") kinds = split_list(argv[i + 1]);
    else if (a == "--calls") calls = std::max(1, std::atoi(argv[i + 1]));
    else if (a == "--layers") layers = std::clamp(std::atoi(argv[i + 1]), 1, 256);
    else if (a == "--stream-mb") stream_mb = std::clamp(std::atof(argv[i + 1]), 0.0, 1024.0);
    else if (a == "--cpu-isa") kernels::select_cpu_kernels(argv[i + 1], false);
    else {
      std::fprintf(stderr, "%s: unknown option %s\n", argv[0], a.c_str());
      return 2;
    }
  }
  const bool bad_list = keys.empty() || threads.empty() || *std::min_element(keys.begin(), keys.end()) < 4 ||
                        *std::max_element(keys.begin(), keys.end()) > (1 << 20) ||
                        *std::min_element(threads.begin(), threads.end()) < 1;
  if (hkv <= 0 || hq <= 0 || hq % hkv || bad_list || !kernels::paged_attention_split_runs(D)) {
    std::fprintf(stderr,
                 "%s: needs heads a multiple of kv-heads, keys 4..1048576, threads >= 1 and a head_dim the split "
                 "kernels take\n",
                 argv[0]);
    return 2;
  }
  const int max_keys = *std::max_element(keys.begin(), keys.end());
  const int64_t blocks = (max_keys + Cache::kBlock - 1) / Cache::kBlock;
  const Cache cache(blocks * layers, hkv, D);  // layer l: blocks table[l * blocks ..]
  const std::vector<float> q = randn(size_t(hq * D), 4);
  std::vector<float> out(size_t(hq * D));
  const size_t slice = size_t(stream_mb * (1 << 20)) / 64 * 64;
  std::vector<uint8_t> weights(slice * size_t(layers), 1);
  std::atomic<uint8_t> sink{0};
  auto stream = [&](ThreadPool& pool, int layer) {  // a layer's weights, read by the pool
    const uint8_t* w = weights.data() + slice * size_t(layer);
    pool.parallel_for(int64_t(slice / 64), [&](int64_t a, int64_t b) {
      uint8_t acc = 0;
      for (int64_t i = a; i < b; ++i) acc ^= w[i * 64];
      sink ^= acc;
    });
  };
  std::printf("attention isa %s; %d query heads, %d kv heads, head_dim %d; %d layers, %.1f MB streamed a layer\n",
              kernels::qlinear_isa(), hq, hkv, D, layers, stream_mb);
  std::printf("%-5s %6s %3s %12s %10s %8s %6s %6s\n", "kv", "keys", "thr", "per_head_us", "split_us", "split/ph",
              "curve", "choice");
  for (const std::string& kind : kinds) {
    if (kind != "f32" && kind != "int8" && kind != "fp8") {
      std::fprintf(stderr, "%s: --kv takes f32, int8, fp8\n", argv[0]);
      return 2;
    }
    if (kind != "f32" && !kernels::paged_attention_split_runs(kind == "int8" ? kernels::KvQuant::Int8
                                                                               : kernels::KvQuant::Fp8, D))
      continue;
    for (int th : threads) {
      ThreadPool pool(th);
      cpu::SplitDecodeAttention split;
      for (int n : keys) {
        const int32_t position = n - 1;
        auto run = [&](bool staged, int layer) {
          const int32_t* table = cache.table.data() + int64_t(layer) * blocks;
          const std::vector<cpu::SplitDecodeToken> tokens = {{0, table, position, nullptr}};
          if (kind == "f32") {
            if (staged) split.run(pool, tokens, q.data(), 0, cache.f32(), hq, hkv, 0.125f, out.data());
            else per_head(pool, cache.f32(), table, q.data(), hq, hkv, position, out.data());
          } else {
            const kernels::PagedKvQuantView view = cache.quant(kind == "int8");
            if (staged) split.run(pool, tokens, q.data(), 0, view, hq, hkv, 0.125f, out.data());
            else per_head(pool, view, table, q.data(), hq, hkv, position, out.data());
          }
        };
        std::vector<double> us[2];
        for (int c = 0; c < calls; ++c)
          for (int staged = 0; staged < 2; ++staged) {  // alternated: drifts hit both alike
            const int layer = (2 * c + staged) % layers;
            stream(pool, layer);
            const auto t0 = std::chrono::steady_clock::now();
            run(staged, layer);
            const auto t1 = std::chrono::steady_clock::now();
            us[staged].push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
          }
        const double a = median(us[0]), b = median(us[1]);
        const double cost = kind == "f32" ? kernels::paged_attention_split_cost(n)
                                          : kernels::paged_attention_split_cost(
                                                kind == "int8" ? kernels::KvQuant::Int8 : kernels::KvQuant::Fp8, n);
        std::printf("%-5s %6d %3d %12.1f %10.1f %8.3f %6.3f %6s\n", kind.c_str(), n, th, a, b, b / a, cost,
                    cpu::split_decode_attention_pays(cost, hq, th) ? "split" : "whole");
        std::fflush(stdout);
      }
    }
  }
  // A prompt's attention: its last 4 x T query tokens (positions keys - 4T .. keys - 1) as T tiles of
  // four (kernels::paged_attention_tiles), every query head on one thread, the layers in turn.
  std::printf("\nprefill tiles: T tiles of 4 query tokens x %d query heads, 1 thread\n%-5s %6s %3s %12s %14s\n", hq,
              "kv", "keys", "T", "call_us", "ns_per_q_key");
  ThreadPool one(1);
  constexpr int kMaxQueries = 4 * kernels::kPagedAttentionMaxTiles;
  const std::vector<float> qt = randn(size_t(kMaxQueries * hq * D), 5);
  std::vector<float> out_t(size_t(kMaxQueries * hq * D));
  for (const std::string& kind : kinds)
    for (int n : keys)
      for (int T : tile_counts) {
        if (T < 1 || T > kernels::kPagedAttentionMaxTiles || n < 4 * T || kind == "fp8") continue;
        std::vector<float> scratch(size_t(4 * T * kernels::paged_attention_scratch(n - 1)));
        int32_t positions[kMaxQueries];
        double pairs = 0;  // (query, key) products of a call, per head
        for (int i = 0; i < 4 * T; ++i) positions[i] = n - 4 * T + i, pairs += positions[i] + 1;
        std::vector<double> us;
        for (int c = 0; c < calls; ++c) {
          const int layer = c % layers;
          const int32_t* table = cache.table.data() + int64_t(layer) * blocks;
          stream(one, layer);
          const auto t0 = std::chrono::steady_clock::now();
          for (int h = 0; h < hq; ++h) {
            const float* qp[kMaxQueries];
            float *sp[kMaxQueries], *op[kMaxQueries];
            for (int i = 0; i < 4 * T; ++i) {
              qp[i] = qt.data() + (i * hq + h) * D, op[i] = out_t.data() + (i * hq + h) * D;
              sp[i] = scratch.data() + i * kernels::paged_attention_scratch(n - 1);
            }
            const int64_t kvh = h / (hq / hkv);
            const bool ran = kind == "f32" ? kernels::paged_attention_tiles(T, qp, positions, cache.f32(), table, kvh,
                                                                            0.125f, sp, op)
                                           : kernels::paged_attention_tiles_quant(T, qp, positions, cache.quant(true),
                                                                                  table, kvh, 0.125f, sp, op);
            if (!ran) return std::printf("no tile kernel for head_dim %d here\n", D), 0;
          }
          us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
        }
        const double m = median(us);
        std::printf("%-5s %6d %3d %12.1f %14.3f\n", kind.c_str(), n, T, m, 1000 * m / (hq * pairs));
        std::fflush(stdout);
      }
  return 0;
}
