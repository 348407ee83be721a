#!/usr/bin/env python3
"""Makes tests/golden/quant/smollm2_rtn_w4g64_golden.json: HF transformers' (fp32, with the
`compressed-tensors` package decompressing the checkpoint) outputs for the default model quantized
by `llmctl quantize` -- the proof that what llmctl writes loads in transformers and means there
what it means in llmctl.

The checkpoint is made by the command recorded in the JSON ("command"); quantize is deterministic,
so e2e.test_quantize makes it again, checks its sha256 equals "model_sha256", and scores it with
llmctl against these cases (the same case format and cases as tests/golden/make_golden.py).

Needs: torch, transformers, compressed-tensors (PyPI). Usage:
  llmctl quantize $LLMCTL_HOME/models/SmolLM2-135M-Instruct/hf /tmp/rtn-w4g64 --method rtn --bits 4 --group-size 64
  python3 tests/golden/quant/make_quantize_golden.py /tmp/rtn-w4g64
"""
import hashlib
import json
import os
import sys

import compressed_tensors
import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from make_golden import NEW, SEQ, TOPK, run_cases  # noqa: E402

QDIR = sys.argv[1]
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "smollm2_rtn_w4g64_golden.json")
COMMAND = "llmctl quantize {model} {out} --method rtn --bits 4 --group-size 64"


def main():
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(QDIR)
    model = AutoModelForCausalLM.from_pretrained(QDIR, dtype=torch.float32)
    model.eval()
    sha = hashlib.sha256(open(os.path.join(QDIR, "model.safetensors"), "rb").read()).hexdigest()
    out = {"model": "SmolLM2-135M-Instruct quantized by llmctl (RTN int4 g64 sym, compressed-tensors), loaded by "
                    "transformers", "command": COMMAND, "model_sha256": sha,
           "quantization_config": json.load(open(os.path.join(QDIR, "config.json")))["quantization_config"],
           "transformers": transformers.__version__, "torch": torch.__version__,
           "compressed_tensors": compressed_tensors.__version__,
           "seq_len": SEQ, "top_k": TOPK, "new_tokens": NEW}
    out["cases"] = run_cases(model, tok)
    with open(OUT, "w") as fh:
        json.dump(out, fh, indent=None, separators=(",", ":"))
        fh.write("\n")
    print("wrote", OUT, file=sys.stderr)


if __name__ == "__main__":
    main()
