#include "engine/generate_one.h"

#include <algorithm>

#include "engine/core/error.h"

namespace llmctl {

GenerateOneResult generate_one(Executor& executor, const Tokenizer& tokenizer, std::vector<int> prompt,
                               const SamplingParams& params, const std::function<void(std::string_view)>& on_text,
                               const EngineConfig& base) {
  EngineConfig ec;
  const int max_context = base.max_context;
  ec.max_context = max_context;
  ec.proposer = base.proposer;
  ec.num_speculative_tokens = base.num_speculative_tokens;
  ec.jump_forward_tokens = base.jump_forward_tokens;
  ec.sched.max_num_seqs = std::max(1, params.num_generated_sequences());
  ec.sched.max_num_batched_tokens = 512;  // prefill chunk
  const int64_t tokens = int64_t(prompt.size()) + params.max_tokens;
  ec.num_blocks = int(std::min<int64_t>((tokens + ec.sched.block_size - 1) / ec.sched.block_size + 1,
                                        int64_t(1) << 30));
  int context = executor.config().max_position_embeddings;
  if (max_context > 0) context = std::min(context, max_context);
  if (tokens > context) ec.num_blocks = (context + ec.sched.block_size - 1) / ec.sched.block_size + 1;
  Engine engine(executor, tokenizer, ec);
  Engine::StreamFn stream;
  if (on_text)
    stream = [&](const StreamEvent& e) {
      if (e.index == 0 && !e.text.empty()) on_text(e.text);
    };
  const int64_t id = engine.submit(std::move(prompt), params, stream);
  engine.drain();
  RequestResult r = *engine.take_result(id);
  if (!r.error.empty()) throw Error("generation failed: " + r.error);
  GenerateOneResult out;
  out.output = r.outputs.at(0);
  out.prompt_ids = std::move(r.prompt_ids);
  out.prefill_seconds = r.first_token_seconds > 0 ? r.first_token_seconds - r.submit_seconds : 0;
  out.decode_seconds = r.first_token_seconds > 0 ? r.finish_seconds - r.first_token_seconds : 0;
  out.stats = engine.stats();
  return out;
}

}  // namespace llmctl
