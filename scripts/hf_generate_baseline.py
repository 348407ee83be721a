#!/usr/bin/env python3
"""Baseline for the engine's offline throughput: HF transformers `generate` on the same GPU, model
and requests. Takes a `generate --prompts` JSONL file, runs its prompts in batches of --batch
(left padding), greedy, exactly --new-tokens new tokens each (EOS ignored via min_new_tokens), and
prints one JSON line: requests, generated tokens, seconds, tokens/s.
Usage: hf_generate_baseline.py MODEL_DIR REQUESTS.jsonl [--batch 64] [--new-tokens 128] [--limit 256]
"""
import argparse
import json
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("requests")
ap.add_argument("--batch", type=int, default=64)
ap.add_argument("--new-tokens", type=int, default=128)
ap.add_argument("--limit", type=int, default=256)
args = ap.parse_args()

tok = AutoTokenizer.from_pretrained(args.model)
tok.padding_side = "left"
if tok.pad_token is None:
    tok.pad_token = tok.eos_token
model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16).cuda().eval()
prompts = [json.loads(l)["prompt"] for l in open(args.requests)][: args.limit]


def run(batch_prompts):
    enc = tok(batch_prompts, return_tensors="pt", padding=True).to("cuda")
    out = model.generate(**enc, do_sample=False, max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens,
                         pad_token_id=tok.pad_token_id)
    return out.shape[1] - enc["input_ids"].shape[1]


run(prompts[:2])  # warm-up
torch.cuda.synchronize()
t0 = time.perf_counter()
generated = 0
for i in range(0, len(prompts), args.batch):
    chunk = prompts[i:i + args.batch]
    generated += run(chunk) * len(chunk)
torch.cuda.synchronize()
dt = time.perf_counter() - t0
print(json.dumps({"engine": "transformers.generate", "requests": len(prompts), "batch": args.batch,
                  "new_tokens": args.new_tokens, "generated_tokens": generated, "seconds": round(dt, 3),
                  "generated_tokens_per_s": round(generated / dt, 1)}))
