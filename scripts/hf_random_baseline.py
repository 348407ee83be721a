#!/usr/bin/env python3
"""Baseline for the GPU throughput sweep: HF transformers `generate` on a Llama-3-8B-shaped model with
random bf16 weights (built on the GPU, nothing read from disk), greedy, fixed lengths: each batch
has --batch prompts of IN random tokens and generates exactly OUT tokens (min_new_tokens = OUT).
Prints one JSON line per (IN/OUT, batch): requests, generated tokens, seconds, tokens/s.
Usage: hf_random_baseline.py --cases 128/128,512/128 --batch 1,16,64 [--layers 32] [--batches-per-case 1]
"""
import argparse
import json
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

ap = argparse.ArgumentParser()
ap.add_argument("--cases", default="128/128,512/128")
ap.add_argument("--batch", default="1,16,64")
ap.add_argument("--layers", type=int, default=32)
ap.add_argument("--batches-per-case", type=int, default=1)
args = ap.parse_args()

cfg = LlamaConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=args.layers, num_attention_heads=32,
                  num_key_value_heads=8, head_dim=128, vocab_size=128256, max_position_embeddings=8192,
                  rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=False)
torch.manual_seed(0)
with torch.device("cuda"):
    model = LlamaForCausalLM._from_config(cfg, torch_dtype=torch.bfloat16).eval()
gen = torch.Generator(device="cuda").manual_seed(1)
for case in args.cases.split(","):
    n_in, n_out = (int(x) for x in case.split("/"))
    for b in (int(x) for x in args.batch.split(",")):
        ids = torch.randint(0, 128000, (b, n_in), device="cuda", generator=gen)
        with torch.no_grad():
            model.generate(ids[:, :8], attention_mask=torch.ones_like(ids[:, :8]), max_new_tokens=4, do_sample=False)
        torch.cuda.synchronize()
        t0 = time.time()
        tokens = 0
        for _ in range(args.batches_per_case):
            with torch.no_grad():
                out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n_out,
                                     min_new_tokens=n_out, do_sample=False, pad_token_id=0)
            tokens += (out.shape[1] - n_in) * b
        torch.cuda.synchronize()
        secs = time.time() - t0
        reqs = b * args.batches_per_case
        print(json.dumps({"engine": "transformers " + __import__("transformers").__version__, "input_len": n_in,
                          "output_len": n_out, "batch": b, "requests": reqs, "generated_tokens": tokens,
                          "seconds": secs, "requests_per_s": reqs / secs, "output_tokens_per_s": tokens / secs}),
              flush=True)
