// The small Llama-shaped config the unit tests build random models from (engine/model/random_checkpoint.h):
// 4 query heads over 2 KV heads (GQA), hidden = 4 * head_dim, intermediate = 6 * head_dim, tied embeddings.
#pragma once
#include "engine/model/config.h"

namespace llmctl::test {

inline ModelConfig tiny_llama_config(int vocab_size = 50, int num_layers = 2, int head_dim = 8) {
  ModelConfig c;
  c.hidden_size = 4 * head_dim;
  c.num_layers = num_layers;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = head_dim;
  c.intermediate_size = 6 * head_dim;
  c.vocab_size = vocab_size;
  c.max_position_embeddings = 256;
  c.tie_word_embeddings = true;
  return c;
}

}  // namespace llmctl::test
