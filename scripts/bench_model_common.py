"""What the random bench-model scripts (make-*-bench-model.py) share: their arguments (OUT
[TOKENIZER_DIR], the default model's checkout by default) and the writing of the model with that
tokenizer beside it."""
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
