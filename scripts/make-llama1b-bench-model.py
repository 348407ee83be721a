#!/usr/bin/env python3
"""A random Llama 3.2 1B shaped model for CPU speed runs (docs/PERFORMANCE.md), made by transformers.

The shape of Llama 3.2 1B's layers (hidden 2048, 32 query heads and 8 kv heads of 64, SwiGLU MLP of
8192, rope base 500000) in its 16 layers, tied embeddings, with the default model's tokenizer
(vocabulary 49,152, so prompts tokenize as they do for it): 1.07 billion parameters, the size class
most CPU users run, where every step streams its weights from memory. Seeded; f16 safetensors
(2.1 GB).

  python3 scripts/make-llama1b-bench-model.py OUT [TOKENIZER_DIR]

(the GGUF from it, and TOKENIZER_DIR: scripts/bench_model_common.py). Needs torch and transformers.
"""
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from bench_model_common import out_and_tokenizer, save


def main():
    out, tokenizer = out_and_tokenizer(__doc__)
    torch.manual_seed(12)
    config = LlamaConfig(
        hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
        num_key_value_heads=8, head_dim=64, vocab_size=49152, max_position_embeddings=8192,
        rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=True, bos_token_id=1, eos_token_id=2,
        pad_token_id=0, initializer_range=0.02)
    save(LlamaForCausalLM(config), torch.float16, out, tokenizer)


if __name__ == "__main__":
    main()
