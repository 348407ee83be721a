#!/usr/bin/env python3
"""Makes tests/golden/smollm2_ppl.json: the strided (sliding-window) perplexity of the default
model, SmolLM2-135M-Instruct (the converted HF directory, fp32, CPU), on the start of
WikiText-2 validation, computed by HF transformers the way its perplexity guide does it:

    for begin in range(0, n, stride):
        end = min(begin + ctx, n); trg_len = end - prev_end
        labels = ids[begin:end] with the first (end - begin - trg_len) set to -100
        loss = model(ids[begin:end], labels=labels).loss      # mean over the valid shifted labels
        nll_sum += loss * number of valid shifted labels
        prev_end = end; stop when end == n
    ppl = exp(nll_sum / scored tokens)

The text is the first CHARS characters (code points) of shared/data/wikitext2-valid.txt, tokenized
as `tokenizer(text)` does (SmolLM2 adds no BOS), cut to the first MAX_TOKENS tokens.
tests/e2e/test_bench_ppl.py runs `llmctl bench ppl` on the same text and compares.

Needs: torch, transformers (PyPI). Usage:
  python3 tests/golden/make_ppl_golden.py [HF_MODEL_DIR]
"""
import json
import math
import os
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

HOME = os.environ.get("LLMCTL_HOME", os.path.expanduser("~/.cache/llmctl"))
MODEL = sys.argv[1] if len(sys.argv) > 1 else f"{HOME}/models/SmolLM2-135M-Instruct/hf"
HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "../../../shared/data/wikitext2-valid.txt")
OUT = os.path.join(HERE, "smollm2_ppl.json")
CHARS, MAX_TOKENS, CTX, STRIDE = 5000, 1000, 128, 64


def main():
    torch.manual_seed(0)
    text = open(DATA, encoding="utf-8").read()[:CHARS]
    tok = AutoTokenizer.from_pretrained(MODEL)
    model = AutoModelForCausalLM.from_pretrained(MODEL, dtype=torch.float32)
    model.eval()
    ids = tok(text, return_tensors="pt").input_ids[:, :MAX_TOKENS]
    n = ids.size(1)
    nll_sum, scored, prev_end, windows = 0.0, 0, 0, []
    for begin in range(0, n, STRIDE):
        end = min(begin + CTX, n)
        trg_len = end - prev_end
        input_ids = ids[:, begin:end]
        labels = input_ids.clone()
        labels[:, :-trg_len] = -100
        with torch.no_grad():
            loss = model(input_ids, labels=labels).loss
        valid = int((labels[:, 1:] != -100).sum())  # the model shifts labels left by one
        nll_sum += float(loss) * valid
        scored += valid
        windows.append({"begin": begin, "end": end, "scored": valid, "nll": float(loss)})
        prev_end = end
        if end == n:
            break
    out = {"model": os.path.basename(os.path.dirname(os.path.normpath(MODEL))) + " (HF dir, fp32, CPU)",
           "transformers": transformers.__version__, "torch": torch.__version__,
           "text": "shared/data/wikitext2-valid.txt", "chars": CHARS, "max_tokens": MAX_TOKENS,
           "ctx": CTX, "stride": STRIDE, "tokens": n, "scored_tokens": scored,
           "nll_mean": nll_sum / scored, "ppl": math.exp(nll_sum / scored),
           "input_ids": ids[0].tolist(), "windows": windows}
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"{n} tokens, {len(windows)} windows, {scored} scored, ppl {out['ppl']:.6f} -> {OUT}")


if __name__ == "__main__":
    main()
