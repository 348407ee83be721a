#!/usr/bin/env python3
"""A random Gemma 3 shaped model for CPU speed runs (docs/PERFORMANCE.md), made by transformers.

The shape of Gemma 3 1B's layers (hidden 1152, 4 query heads and 1 kv head of 256, GeGLU MLP of
6912, sliding window 512 on five layers of six, global layers with rope base 1e6 scaled by 8) in 12
layers, with the default model's tokenizer (vocabulary 49,152) so that prompts tokenize as they do
for it. Seeded; f32 safetensors.

  python3 scripts/make-gemma3-bench-model.py OUT [TOKENIZER_DIR]

(the GGUF from it, and TOKENIZER_DIR: scripts/bench_model_common.py). Needs torch and transformers.
"""
import torch
from transformers import Gemma3ForCausalLM, Gemma3TextConfig

from bench_model_common import out_and_tokenizer, save


def main():
    out, tokenizer = out_and_tokenizer(__doc__)
    torch.manual_seed(11)
    config = Gemma3TextConfig(
        hidden_size=1152, intermediate_size=6912, num_hidden_layers=12, num_attention_heads=4,
        num_key_value_heads=1, head_dim=256, vocab_size=49152, max_position_embeddings=32768,
        sliding_window=512, query_pre_attn_scalar=256, tie_word_embeddings=True, bos_token_id=1,
        eos_token_id=2, pad_token_id=0, initializer_range=0.02,
        rope_parameters={"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})
    save(Gemma3ForCausalLM(config), torch.float32, out, tokenizer)


if __name__ == "__main__":
    main()
