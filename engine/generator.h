// Generator: runs requests one at a time through the model over a paged KV cache
// (prefill in chunks, then decode), sampling and streaming text as it goes.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/kv/block_pool.h"
#include "engine/model/llama_model.h"
#include "engine/sample/sampling_params.h"
#include "engine/tokenizer/tokenizer.h"

namespace llmctl {

struct GenerationResult {
  std::vector<int> prompt_ids;
  std::vector<int> output_ids;
  std::string text;
  std::string finish_reason;  // "stop" (EOS or stop string) | "length"
  double prefill_seconds = 0, decode_seconds = 0;
};

struct GeneratorOptions {
  int block_size = 16;
  int prefill_chunk = 512;  // prompt tokens per forward step
  int max_context = 0;      // 0 = the model's max_position_embeddings
};

class Generator {
 public:
  Generator(LlamaModel& model, const Tokenizer& tokenizer, GeneratorOptions opts = {});

  int max_context() const { return max_context_; }

  // Generates from prompt ids; on_text receives each piece of text that is safe to emit.
  GenerationResult generate(const std::vector<int>& prompt, const SamplingParams& params,
                            const std::function<void(std::string_view)>& on_text = {});

  // Teacher-forced scoring: log-softmax rows for every position of ids ([ids.size()][V]).
  std::vector<std::vector<float>> score(const std::vector<int>& ids);

 private:
  // Runs ids[begin, end) at their positions for the sequence in block_table; returns logits of
  // the last token, or of every token when all_logits.
  Tensor step(const std::vector<int>& ids, int begin, int end, bool all_logits);
  void ensure_blocks(int tokens);
  void release_blocks();

  LlamaModel& model_;
  const Tokenizer& tokenizer_;
  GeneratorOptions opts_;
  int max_context_;
  BlockPool pool_;
  std::vector<KvLayer> kv_;
  std::vector<int32_t> block_table_;
};

}  // namespace llmctl
