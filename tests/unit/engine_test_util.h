// A tiny random Llama (engine/model/random_checkpoint.h) with a padded vocabulary (the model has
// more ids than the tokenizer), and the ONE place the unit tests build an Engine or a Scorer from
// it: when the way an Engine is made changes (an Executor instead of the model), only this file does.
#pragma once
#include <deque>
#include <memory>
#include <vector>

#include "byte_tokenizer.h"
#include "engine/backend/backend.h"
#include "engine/engine.h"
#include "engine/executor/local_executor.h"
#include "engine/model/registry.h"
#include "engine/model/random_checkpoint.h"
#include "engine/scorer.h"
#include "tiny_config.h"

namespace llmctl::test {

// Model ids [ByteTokenizer::kVocab, kTinyModelVocab) are padding the tokenizer lacks.
constexpr int kTinyModelVocab = ByteTokenizer::kVocab + 13;

inline ModelConfig tiny_engine_config() {
  return tiny_llama_config(kTinyModelVocab);
}

struct TinyModel {
  std::unique_ptr<Backend> backend = make_cpu_backend(1);
  Checkpoint checkpoint = random_checkpoint(tiny_engine_config(), 11, 0.5f);
  std::unique_ptr<Model> model = make_model(checkpoint, *backend);
  ByteTokenizer tokenizer;
  // One executor (and its KV cache) per Engine or Scorer made from this model; they live as long as it.
  std::deque<std::unique_ptr<LocalExecutor>> executors;
  LocalExecutor& new_executor() { return *executors.emplace_back(std::make_unique<LocalExecutor>(*model)); }
};

inline EngineConfig tiny_engine_options(int num_blocks = 64) {
  EngineConfig c;
  c.num_blocks = num_blocks;
  return c;
}

inline std::unique_ptr<Engine> make_engine(TinyModel& m, EngineConfig config = tiny_engine_options()) {
  return std::make_unique<Engine>(m.new_executor(), m.tokenizer, config);
}

inline std::unique_ptr<Scorer> make_scorer(TinyModel& m) { return std::make_unique<Scorer>(m.new_executor(), m.tokenizer); }

// A prompt of len lowercase letters (byte tokenizer ids), varied by salt.
inline std::vector<int> prompt_of(int len, int salt = 0) {
  std::vector<int> p;
  for (int i = 0; i < len; ++i) p.push_back('a' + (i * 7 + salt) % 26);
  return p;
}

// A request run alone on a fresh engine, to the end.
inline RequestResult run_alone(TinyModel& m, const std::vector<int>& prompt, const SamplingParams& params) {
  auto engine = make_engine(m);
  const int64_t id = engine->submit(prompt, params);
  engine->drain();
  return *engine->take_result(id);
}

}  // namespace llmctl::test
