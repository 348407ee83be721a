#!/usr/bin/env python3
"""A random Llama 3.2 1B shaped model for CPU speed runs (docs/PERFORMANCE.md), made by transformers.

The shape of Llama 3.2 1B's layers (hidden 2048, 32 query heads and 8 kv heads of 64, SwiGLU MLP of
8192, rope base 500000) in its 16 layers, tied embeddings, with the default model's tokenizer
(vocabulary 49,152, so prompts tokenize as they do for it): 1.07 billion parameters, the size class
most CPU users run, where every step streams its weights from memory. Seeded; f16 safetensors
(2.1 GB). For a GGUF, llama.cpp's converter and llama-quantize:

  python3 scripts/make-llama1b-bench-model.py OUT [TOKENIZER_DIR]
  python3 $LLMCTL_HOME/llama.cpp/src/convert_hf_to_gguf.py OUT --outtype f16 --outfile OUT.f16.gguf
  $LLMCTL_HOME/llama.cpp/build/bin/llama-quantize OUT.f16.gguf OUT.q4km.gguf Q4_K_M

TOKENIZER_DIR defaults to the default model's checkout ($LLMCTL_HOME/models/SmolLM2-135M-Instruct/hf).
Needs torch and transformers.
"""
import os
import shutil
import sys

import torch
from transformers import LlamaConfig, LlamaForCausalLM

HOME = os.environ.get("LLMCTL_HOME", os.path.expanduser("~/.cache/llmctl"))


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    out = sys.argv[1]
    tokenizer = sys.argv[2] if len(sys.argv) == 3 else os.path.join(HOME, "models", "SmolLM2-135M-Instruct", "hf")
    torch.manual_seed(12)
    config = LlamaConfig(
        hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
        num_key_value_heads=8, head_dim=64, vocab_size=49152, max_position_embeddings=8192,
        rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=True, bos_token_id=1, eos_token_id=2,
        pad_token_id=0, initializer_range=0.02)
    LlamaForCausalLM(config).to(torch.float16).save_pretrained(out)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tokenizer, name), os.path.join(out, name))
    print(out)


if __name__ == "__main__":
    main()
