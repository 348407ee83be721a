// Decode tokens' attention spread over the threads by keys and columns instead of query heads
// (kernels/cpu/attention.h: paged_attention_split_*). Whole, a token's query heads are one item each:
// one decode token of a 9-head model keeps 9 threads of 16 busy (5 and 4 of 2), and each head reads
// its kv head's whole context, a GQA group's heads the same rows once each. Here a token's context is
// read once per kv head, in chunks of keys that every thread shares. The results are the whole-head
// kernels' bit for bit, so which tokens come here changes no output.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "engine/backend/cpu/cpu_exact_rows.h"
#include "engine/core/thread_pool.h"
#include "kernels/cpu/attention.h"

namespace llmctl::cpu {

struct SplitDecodeToken {
  int64_t row;                 // the token's row in qkv and out
  const int32_t* block_table;  // its sequence's
  int32_t position;
  const StepExactRows* exact = nullptr;  // its sequence's exact open-block rows (an fp8 cache), if any
  int32_t first = 0;                     // its first key (a sliding window's; kernels/cpu/attention.h)
};

// Whether a decode token's attention is worth the three passes over the pool this takes instead of
// one. `cost`: the stages' time over the whole heads' on one thread (kernels::paged_attention_split_cost);
// `items`: the query heads the step would run whole beside it, one item each, over `threads`. Whole,
// the busiest thread takes ceil(items / threads) heads (5 of 9 on 2 threads, 1 of 9 on 16); split,
// every thread about cost x items / threads.
bool split_decode_attention_pays(double cost, int64_t items, int threads);

class SplitDecodeAttention {
 public:
  // max_scratch_floats: score rows a pass over the stages holds at most (default 64 MB); a batch of
  // many long contexts goes in several passes.
  explicit SplitDecodeAttention(int64_t max_scratch_floats = int64_t(1) << 24)
      : max_scratch_floats_(max_scratch_floats) {}

  // qkv [T, W] (query head h at column h * D), out [T, hq * D]; View: kernels::PagedKvView, or a
  // kernels::PagedKvQuantView read in place (paged_attention_split_runs).
  template <class View>
  void run(ThreadPool& pool, const std::vector<SplitDecodeToken>& tokens, const float* qkv, int64_t W,
           const View& cache, int hq, int hkv, float scale, float* out, float softcap = 0.0f);

 private:
  template <class View>
  void run_pass(ThreadPool& pool, std::span<const SplitDecodeToken> tokens, const float* qkv, int64_t W,
                const View& cache, int hq, int hkv, float scale, float* out, float softcap);

  int64_t max_scratch_floats_;
  std::vector<float> scores_;  // [token, query head] scores, then probabilities
};

}  // namespace llmctl::cpu
