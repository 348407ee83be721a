"""What the random bench-model scripts (make-*-bench-model.py) share: their arguments and the writing
of the model with a tokenizer beside it.

  python3 scripts/make-NAME-bench-model.py OUT [TOKENIZER_DIR]

TOKENIZER_DIR defaults to the default model's checkout ($LLMCTL_HOME/models/SmolLM2-135M-Instruct/hf),
so that prompts tokenize as they do for it. For a GGUF, llama.cpp's converter and llama-quantize:

  python3 $LLMCTL_HOME/llama.cpp/src/convert_hf_to_gguf.py OUT --outtype f16 --outfile OUT.f16.gguf
  $LLMCTL_HOME/llama.cpp/build/bin/llama-quantize OUT.f16.gguf OUT.q4km.gguf Q4_K_M
"""
import os
import shutil
import sys

HOME = os.environ.get("LLMCTL_HOME", os.path.expanduser("~/.cache/llmctl"))


def out_and_tokenizer(usage):
    """OUT and TOKENIZER_DIR from the command line; exits with `usage` otherwise."""
    if len(sys.argv) not in (2, 3):
        sys.exit(usage)
    tokenizer = sys.argv[2] if len(sys.argv) == 3 else os.path.join(HOME, "models", "SmolLM2-135M-Instruct", "hf")
    return sys.argv[1], tokenizer


def save(model, dtype, out, tokenizer):
    """The model's weights in dtype as safetensors at out, the tokenizer's files beside them."""
    model.to(dtype).save_pretrained(out)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tokenizer, name), os.path.join(out, name))
    print(out)
