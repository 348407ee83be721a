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
from make_golden import CASES, NEW, SEQ, TOPK  # noqa: E402

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
           "seq_len": SEQ, "top_k": TOPK, "new_tokens": NEW, "cases": []}
    for name, messages, text in CASES:
        prompt = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) if messages else text
        ids = tok(prompt, add_special_tokens=False)["input_ids"]
        case = {"name": name, "prompt": prompt}
        with torch.no_grad():
            if messages is None:
                x = torch.tensor([ids[:SEQ]])
                logp = torch.log_softmax(model(x).logits[0].double(), dim=-1)
                top = torch.topk(logp, TOPK, dim=-1)
                case["input_ids"] = ids[:SEQ]
                case["top_ids"] = top.indices.tolist()
                case["top_logprobs"] = [[round(v, 6) for v in row] for row in top.values.tolist()]
                gen_prompt = ids[:32]
            else:
                gen_prompt = ids
            seq, margins = list(gen_prompt), []
            for _ in range(NEW):
                logits = model(torch.tensor([seq])).logits[0, -1]
                t2 = torch.topk(logits, 2)
                margins.append(round(float(t2.values[0] - t2.values[1]), 5))
                seq.append(int(t2.indices[0]))
            case["greedy_prompt_ids"] = list(gen_prompt)
            case["greedy_ids"] = seq[len(gen_prompt):]
            case["greedy_margins"] = margins
        out["cases"].append(case)
        print(name, repr(tok.decode(case["greedy_ids"])[:80]), file=sys.stderr)
    with open(OUT, "w") as fh:
        json.dump(out, fh, indent=None, separators=(",", ":"))
        fh.write("\n")
    print("wrote", OUT, file=sys.stderr)


if __name__ == "__main__":
    main()
