#include "engine/scorer.h"

#include <algorithm>
#include <cstring>

#include "engine/core/error.h"
#include "engine/sample/logprobs.h"

namespace llmctl {

namespace {
int blocks_for(int tokens, int block_size) { return (tokens + block_size - 1) / block_size; }
}  // namespace

Scorer::Scorer(Executor& executor, const Tokenizer& tokenizer, ScorerOptions opts)
    : exec_(executor),
      tokenizer_(tokenizer),
      opts_(opts),
      max_context_(opts.max_context > 0 ? opts.max_context : executor.config().max_position_embeddings),
      pool_(blocks_for(max_context_, opts.block_size)) {
  exec_.check_context(max_context_);
  spec_ = exec_.kv_spec(opts_.block_size);
  exact_ = spec_.exact_ring_blocks > 0;  // one sequence at a time: slot 0, chunks never rolled back
  alloc_cache();
}

// One pool for every layer (sliding ones too: a single sequence, each block its own).
void Scorer::alloc_cache() {
  exec_.alloc_kv_cache(spec_, pool_.num_blocks());
  kv_epoch_ = exec_.kv_cache_epoch();
}

void Scorer::ensure_blocks(int tokens) {
  while (int(block_table_.size()) < blocks_for(tokens, opts_.block_size)) {
    int id = pool_.allocate();
    LLM_CHECK(id >= 0) << "KV cache exhausted at " << tokens << " tokens";
    block_table_.push_back(id);
  }
}

void Scorer::release_blocks() {
  for (int id : block_table_) pool_.release(id);
  block_table_.clear();
}

Tensor Scorer::step(const std::vector<int>& ids, int begin, int end, bool all_logits) {
  if (exec_.kv_cache_epoch() != kv_epoch_) alloc_cache();
  ensure_blocks(end);
  BatchPlan plan;
  const int B = opts_.block_size;
  for (int p = begin; p < end; ++p) {
    plan.token_ids.push_back(ids[p]);
    plan.positions.push_back(p);
    plan.slot_mapping.push_back(block_table_[p / B] * B + p % B);
  }
  plan.query_start = {0, end - begin};
  plan.context_len = {end};
  plan.block_table = block_table_;
  plan.max_blocks_per_seq = int(block_table_.size());
  if (exact_) plan.exact_slot = {0};
  if (all_logits)
    for (int r = 0; r < end - begin; ++r) plan.logits_rows.push_back(r);
  else
    plan.logits_rows = {end - begin - 1};
  return exec_.execute_to_host(plan);
}

std::vector<std::vector<float>> Scorer::score(const std::vector<int>& ids) {
  LLM_REQUIRE(!ids.empty() && int(ids.size()) <= max_context_) << "cannot score " << ids.size() << " tokens";
  struct Release {
    Scorer* g;
    ~Release() { g->release_blocks(); }
  } release{this};
  std::vector<std::vector<float>> out;
  const int vocab = exec_.config().vocab_size;
  for (int begin = 0; begin < int(ids.size()); begin += opts_.prefill_chunk) {
    int end = std::min<int>(ids.size(), begin + opts_.prefill_chunk);
    Tensor logits = step(ids, begin, end, true);
    for (int r = 0; r < end - begin; ++r) out.push_back(log_softmax(logits.ptr<float>() + int64_t(r) * vocab, vocab));
  }
  return out;
}

std::vector<double> Scorer::target_logprobs(const std::vector<int>& ids, int first) {
  LLM_REQUIRE(!ids.empty() && int(ids.size()) <= max_context_) << "cannot score " << ids.size() << " tokens";
  LLM_REQUIRE(first >= 1 && first <= int(ids.size())) << "first scored position " << first << " out of range";
  struct Release {
    Scorer* g;
    ~Release() { g->release_blocks(); }
  } release{this};
  std::vector<double> out;
  const int vocab = exec_.config().vocab_size;
  const int n = int(ids.size());
  for (int begin = 0; begin < n - 1; begin += opts_.prefill_chunk) {
    const int end = std::min(n - 1, begin + opts_.prefill_chunk);  // positions whose logits may be needed
    if (end <= first - 1) {  // nothing scored in this chunk: fill the cache only
      step(ids, begin, end, false);
      continue;
    }
    Tensor logits = step(ids, begin, end, true);
    for (int p = std::max(begin, first - 1); p < end; ++p) {
      const float* row = logits.ptr<float>() + int64_t(p - begin) * vocab;
      out.push_back(double(row[ids[p + 1]]) - log_sum_exp(row, vocab));
    }
  }
  return out;
}

}  // namespace llmctl
