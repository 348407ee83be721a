// Scorer: teacher-forced scoring of one token sequence (the log-softmax row of every position),
// prefilled in chunks over its own paged KV cache. Generation goes through the Engine
// (engine/engine.h, engine/generate_one.h).
#pragma once
#include <vector>

#include "engine/kv/block_pool.h"
#include "engine/executor/executor.h"
#include "engine/tokenizer/tokenizer.h"

namespace llmctl {

struct ScorerOptions {
  int block_size = 16;
  int prefill_chunk = 512;  // prompt tokens per forward step
  int max_context = 0;      // 0 = the model's max_position_embeddings
};

class Scorer {
 public:
  // The executor's KV cache is (re)allocated for the scorer: one user of an executor at a time.
  Scorer(Executor& executor, const Tokenizer& tokenizer, ScorerOptions opts = {});

  int max_context() const { return max_context_; }

  // Teacher-forced scoring: log-softmax rows for every position of ids ([ids.size()][V]).
  std::vector<std::vector<float>> score(const std::vector<int>& ids);
  // log p(ids[p] | ids[0..p)) for p in [first, ids.size()), first >= 1; only the rows needed are
  // computed, and the log-sum-exp is taken in double (perplexity).
  std::vector<double> target_logprobs(const std::vector<int>& ids, int first);

 private:
  // Runs ids[begin, end) at their positions for the sequence in block_table; returns logits of
  // the last token, or of every token when all_logits.
  Tensor step(const std::vector<int>& ids, int begin, int end, bool all_logits);
  void ensure_blocks(int tokens);
  void release_blocks();

  Executor& exec_;
  const Tokenizer& tokenizer_;
  ScorerOptions opts_;
  int max_context_;
  BlockPool pool_;
  std::vector<int32_t> block_table_;
  bool exact_ = false;  // the cache keeps exact open-block rows: the sequence takes slot 0
  KvCacheSpec spec_;
  uint64_t kv_epoch_ = 0;  // the executor's kv_cache_epoch() after our allocation
  void alloc_cache();      // ours again, where another user (an Engine) replaced it
};

}  // namespace llmctl
