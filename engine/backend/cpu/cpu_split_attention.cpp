#include "engine/backend/cpu/cpu_split_attention.h"

#include <algorithm>
#include <span>

namespace llmctl::cpu {

namespace {

// Keys a thread reads at least in one item of the first stage, and how many items a thread gets
// at least where the context allows (parallel_for gives each thread a run of items of equal count:
// with 8 or more, one item more or less is a small share).
constexpr int32_t kMinChunk = 64;
constexpr int64_t kItemsPerThread = 8;

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

}  // namespace

bool split_decode_attention_pays(double cost, int64_t items, int threads) {
  if (items <= 0 || threads <= 0) return false;
  const int64_t busiest = (items + threads - 1) / threads;
  return cost * double(items) < double(busiest * threads);
}

template <class View>
void SplitDecodeAttention::run(ThreadPool& pool, const std::vector<SplitDecodeToken>& tokens, const float* qkv,
                               int64_t W, const View& cache, int hq, int hkv, float scale, float* out, float softcap) {
  // Tokens a pass takes: their score rows within max_scratch_floats_ (one token at least).
  int32_t max_position = 0;
  for (const auto& t : tokens) max_position = std::max(max_position, t.position);
  const int64_t per_pass =
      std::max<int64_t>(1, max_scratch_floats_ / (int64_t(hq) * kernels::paged_attention_scratch(max_position)));
  for (size_t i = 0; i < tokens.size(); i += size_t(per_pass)) {
    const size_t end = std::min(tokens.size(), i + size_t(per_pass));
    run_pass(pool, std::span(tokens.data() + i, end - i), qkv, W, cache, hq, hkv, scale, out, softcap);
  }
}

template <class View>
void SplitDecodeAttention::run_pass(ThreadPool& pool, std::span<const SplitDecodeToken> tokens, const float* qkv,
                                    int64_t W, const View& cache, int hq, int hkv, float scale, float* out,
                                    float softcap) {
  const int64_t D = cache.head_dim, n = int64_t(tokens.size()), group = hq / hkv, threads = pool.size();
  int32_t max_position = 0;
  int64_t keys = 0;
  for (const auto& t : tokens) max_position = std::max(max_position, t.position), keys += t.position + 1 - t.first;
  const int64_t S = kernels::paged_attention_scratch(max_position);
  scores_.resize(size_t(n * hq * S));

  // The queries of token i that read kv head kvh (heads kvh * group ..): their rows in qkv, score
  // rows and outputs, in a thread's own pointer arrays.
  struct Pointers {
    std::vector<const float*> q;
    std::vector<float*> scores, out;
    kernels::KvExactRows exact;
  };
  auto group_of = [&](Pointers& p, int64_t i, int64_t kvh) {
    const SplitDecodeToken& t = tokens[size_t(i)];
    p.q.resize(size_t(group)), p.scores.resize(size_t(group)), p.out.resize(size_t(group));
    for (int64_t g = 0; g < group; ++g) {
      const int64_t h = kvh * group + g;
      p.q[size_t(g)] = qkv + t.row * W + h * D;
      p.scores[size_t(g)] = scores_.data() + (i * hq + h) * S;
      p.out[size_t(g)] = out + t.row * hq * D + h * D;
    }
    kernels::SplitAttentionQueries s{p.q.data(), p.scores.data(), p.out.data(), int(group), t.position, kvh};
    s.first = t.first;
    if (t.exact && t.exact->k) {
      p.exact = t.exact->for_query(t.position, int32_t(cache.block_size), kvh, D);
      s.exact = &p.exact;
    }
    return s;
  };

  // 1. scores: (token, kv head, chunk of keys), chunks a multiple of 16 keys sized for the threads, from
  // the token's window's start
  struct KeyItem {
    int64_t token, kvh;
    int32_t j0, j1;
  };
  const int32_t chunk =
      int32_t(std::clamp<int64_t>(round_up(keys * hkv / (threads * kItemsPerThread), kMinChunk), kMinChunk, 1 << 16));
  std::vector<KeyItem> items;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t kvh = 0; kvh < hkv; ++kvh)
      for (int32_t j0 = kernels::attention_window_start(tokens[size_t(i)].first); j0 <= tokens[size_t(i)].position;
           j0 += chunk)
        items.push_back({i, kvh, j0, std::min(tokens[size_t(i)].position + 1, j0 + chunk)});
  pool.parallel_for(int64_t(items.size()), [&](int64_t a, int64_t b) {
    Pointers p;
    for (int64_t k = a; k < b; ++k) {
      const KeyItem& it = items[size_t(k)];
      kernels::paged_attention_split_scores(group_of(p, it.token, it.kvh), cache, tokens[size_t(it.token)].block_table,
                                            scale, it.j0, it.j1);
    }
  });
  // 2. each query's softmax (its scores soft-capped first where softcap > 0)
  pool.parallel_for(n * hq, [&](int64_t a, int64_t b) {
    for (int64_t k = a; k < b; ++k)
      kernels::paged_attention_split_softmax(scores_.data() + k * S, tokens[size_t(k / hq)].position,
                                             tokens[size_t(k / hq)].first, softcap);
  });
  // 3. values: (token, kv head, piece of columns), pieces of whole SIMD vectors
  const int64_t unit = kernels::paged_attention_split_columns();
  const int64_t pieces = std::clamp<int64_t>((2 * threads + n * hkv - 1) / (n * hkv), 1, D / unit);
  const int64_t width = round_up((D + pieces - 1) / pieces, unit);
  pool.parallel_for(n * hkv * pieces, [&](int64_t a, int64_t b) {
    Pointers p;
    for (int64_t k = a; k < b; ++k) {
      const int64_t i = k / (hkv * pieces), kvh = k / pieces % hkv, d0 = k % pieces * width;
      if (d0 < D)
        kernels::paged_attention_split_values(group_of(p, i, kvh), cache, tokens[size_t(i)].block_table, d0,
                                              std::min(width, D - d0));
    }
  });
}

template void SplitDecodeAttention::run(ThreadPool&, const std::vector<SplitDecodeToken>&, const float*, int64_t,
                                        const kernels::PagedKvView&, int, int, float, float*, float);
template void SplitDecodeAttention::run(ThreadPool&, const std::vector<SplitDecodeToken>&, const float*, int64_t,
                                        const kernels::PagedKvQuantView&, int, int, float, float*, float);

}  // namespace llmctl::cpu
