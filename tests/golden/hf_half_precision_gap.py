#!/usr/bin/env python3
"""How far HF transformers itself lands from its own fp32 golden outputs when run in bf16 and
f16 (CPU): the yardstick for llmctl's half-precision GPU golden results. Needs torch, transformers,
accelerate, gguf. Usage: python3 tests/golden/hf_half_precision_gap.py (from the repository root)."""
import json
import os

import torch
from transformers import AutoModelForCausalLM

G = os.path.join(os.environ.get("LLMCTL_HOME", os.path.expanduser("~/.cache/llmctl")), "models/SmolLM2-135M-Instruct")
golden = json.load(open("tests/golden/smollm2_golden.json"))
for dt in (torch.bfloat16, torch.float16):
    m = AutoModelForCausalLM.from_pretrained(G, gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf", dtype=dt).eval()
    for c in golden["cases"]:
        if "input_ids" not in c: continue
        with torch.no_grad():
            lp = torch.log_softmax(m(torch.tensor([c["input_ids"]])).logits[0].double(), -1)
        worst = max(abs(lp[p, i].item() - v) for p in range(64) for i, v in zip(c["top_ids"][p], c["top_logprobs"][p]))
        print(dt, c["name"], f"max |dlogprob| top-20 = {worst:.3e}")
