#include "engine/generator.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>

#include "engine/core/error.h"
#include "engine/sample/detokenizer.h"
#include "engine/sample/logprobs.h"
#include "engine/sample/sampler.h"

namespace llmctl {

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
int blocks_for(int tokens, int block_size) { return (tokens + block_size - 1) / block_size; }
}  // namespace

Generator::Generator(LlamaModel& model, const Tokenizer& tokenizer, GeneratorOptions opts)
    : model_(model),
      tokenizer_(tokenizer),
      opts_(opts),
      max_context_(opts.max_context > 0 ? opts.max_context : model.config().max_position_embeddings),
      pool_(blocks_for(max_context_, opts.block_size)) {
  kv_ = model_.alloc_kv_cache(pool_.num_blocks(), opts_.block_size);
}

void Generator::ensure_blocks(int tokens) {
  while (int(block_table_.size()) < blocks_for(tokens, opts_.block_size)) {
    int id = pool_.allocate();
    LLM_CHECK(id >= 0) << "KV cache exhausted at " << tokens << " tokens";
    block_table_.push_back(id);
  }
}

void Generator::release_blocks() {
  for (int id : block_table_) pool_.release(id);
  block_table_.clear();
}

Tensor Generator::step(const std::vector<int>& ids, int begin, int end, bool all_logits) {
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
  if (all_logits)
    for (int r = 0; r < end - begin; ++r) plan.logits_rows.push_back(r);
  else
    plan.logits_rows = {end - begin - 1};
  return model_.forward(plan, kv_);
}

GenerationResult Generator::generate(const std::vector<int>& prompt, const SamplingParams& params,
                                     const std::function<void(std::string_view)>& on_text) {
  const int vocab = model_.config().vocab_size;
  params.validate(vocab);
  LLM_REQUIRE(!prompt.empty()) << "the prompt is empty";
  LLM_REQUIRE(int(prompt.size()) < max_context_)
      << "the prompt has " << prompt.size() << " tokens, but the context holds " << max_context_;
  for (int id : prompt) LLM_REQUIRE(id >= 0 && id < vocab) << "token id " << id << " outside the vocabulary";

  GenerationResult r;
  r.prompt_ids = prompt;
  const uint64_t seed = params.seed ? *params.seed : std::random_device{}();
  std::vector<int> eos_ids = model_.config().eos_token_ids;
  eos_ids.push_back(tokenizer_.eos_id());
  SequenceState state(params, prompt, seed, 0, eos_ids);  // one sequence: child 0 (n > 1 is the Engine's)
  StreamingText stream(params.stop);
  std::vector<int> ids = prompt;
  struct Release {
    Generator* g;
    ~Release() { g->release_blocks(); }
  } release{this};

  double t0 = now_seconds();
  Tensor logits;
  for (int begin = 0; begin < int(prompt.size()); begin += opts_.prefill_chunk) {
    int end = std::min<int>(prompt.size(), begin + opts_.prefill_chunk);
    logits = step(ids, begin, end, false);
  }
  r.prefill_seconds = now_seconds() - t0;
  t0 = now_seconds();
  r.finish_reason = "length";
  for (int i = 0; i < params.max_tokens; ++i) {
    const int tok = sample(logits.ptr<float>(), vocab, params, state, uint64_t(i)).token;
    if (is_stop_token(tok, params, eos_ids)) {
      r.finish_reason = "stop";
      break;
    }
    ids.push_back(tok);
    r.output_ids.push_back(tok);
    std::string piece = stream.push(tokenizer_.token_bytes(tok));
    if (on_text && !piece.empty()) on_text(piece);
    if (stream.stopped()) {
      r.finish_reason = "stop";
      break;
    }
    if (int(ids.size()) >= max_context_ || i + 1 == params.max_tokens) break;
    logits = step(ids, int(ids.size()) - 1, int(ids.size()), false);
  }
  std::string tail = stream.finish();
  if (on_text && !tail.empty()) on_text(tail);
  r.text = stream.text();
  r.decode_seconds = now_seconds() - t0;
  return r;
}

std::vector<std::vector<float>> Generator::score(const std::vector<int>& ids) {
  LLM_REQUIRE(!ids.empty() && int(ids.size()) <= max_context_) << "cannot score " << ids.size() << " tokens";
  struct Release {
    Generator* g;
    ~Release() { g->release_blocks(); }
  } release{this};
  std::vector<std::vector<float>> out;
  const int vocab = model_.config().vocab_size;
  for (int begin = 0; begin < int(ids.size()); begin += opts_.prefill_chunk) {
    int end = std::min<int>(ids.size(), begin + opts_.prefill_chunk);
    Tensor logits = step(ids, begin, end, true);
    for (int r = 0; r < end - begin; ++r) out.push_back(log_softmax(logits.ptr<float>() + int64_t(r) * vocab, vocab));
  }
  return out;
}

}  // namespace llmctl
