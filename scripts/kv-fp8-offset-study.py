#!/usr/bin/env python3
"""Where an fp8 (e4m3) KV cache loses perplexity, measured with transformers (the reference), to
choose what llmctl's fp8 cache should do next. Each mode rounds the cached keys (after rope) and
values of every layer the way a cache would, and scores WikiText-2 in windows of 512 tokens:

  none        f32 cache (the baseline)
  bf16        keys and values rounded to bf16 (a 16-bit cache)
  fp8         keys and values rounded to e4m3 (scale 1.0, as llmctl's uncalibrated fp8 cache)
  fp8-kmean   fp8, keys stored minus a per-channel mean (per layer, kv head and dimension), never
              added back: q.mean is the same for every key of a query, so softmax cancels it
  fp8-vmean   fp8, values stored minus their per-channel mean, added back to the attention output
              (the probabilities sum to 1)
  fp8-kvmean  both

The means are calibrated on 8 samples of 512 tokens of tinyshakespeare (not the scored text).
Usage: /work/venv-ref/bin/python scripts/kv-fp8-offset-study.py MODEL_DIR SHARED_DATA_DIR TOKENS MODES
  e.g. ... ~/.cache/llmctl/models/SmolLM2-135M-Instruct/hf ../shared/data 32768 none,fp8,fp8-vmean
"""
import math
import os
import random
import sys

import torch
import transformers.models.llama.modeling_llama as llama
from transformers import AutoModelForCausalLM, AutoTokenizer

model_dir, data_dir, n_tokens, modes = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split(",")
torch.manual_seed(0)
tok = AutoTokenizer.from_pretrained(model_dir)
model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager").eval()
reference_attention = llama.eager_attention_forward
state = {"mode": "none", "calibrating": False}
sums = {}  # (layer, "k" | "v") -> (sum over tokens [kv heads, head dim], token count)


def mean(layer, which):
    s, n = sums[(layer, which)]
    return (s / n)[None, :, None, :]  # [1, kv heads, 1, head dim]


def e4m3(x):
    return x.clamp(-448, 448).to(torch.float8_e4m3fn).to(torch.float32)


def cached_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kw):
    layer, mode = module.layer_idx, state["mode"]
    if state["calibrating"]:  # key, value: [batch, kv heads, tokens, head dim], keys after rope
        for which, x in (("k", key), ("v", value)):
            s, n = sums.get((layer, which), (0, 0))
            sums[(layer, which)] = (s + x.sum(dim=(0, 2)), n + x.shape[0] * x.shape[2])
    elif mode == "bf16":
        key, value = key.to(torch.bfloat16).float(), value.to(torch.bfloat16).float()
    elif mode.startswith("fp8"):
        k_off = mean(layer, "k") if mode in ("fp8-kmean", "fp8-kvmean") else 0
        v_off = mean(layer, "v") if mode in ("fp8-vmean", "fp8-kvmean") else 0
        key = e4m3(key - k_off)
        value = e4m3(value - v_off) + v_off
    elif mode != "none":
        raise SystemExit("unknown mode " + mode)
    return reference_attention(module, query, key, value, attention_mask, scaling, dropout, **kw)


llama.eager_attention_forward = cached_attention
if hasattr(llama, "ALL_ATTENTION_FUNCTIONS"):
    llama.ALL_ATTENTION_FUNCTIONS["eager"] = cached_attention

calib = tok(open(os.path.join(data_dir, "tinyshakespeare.txt"), encoding="utf-8").read(),
            return_tensors="pt").input_ids[0]
rng = random.Random(0)
state["calibrating"] = True
with torch.no_grad():
    for s in [rng.randrange(len(calib) - 512) for _ in range(8)]:
        model(calib[s:s + 512].unsqueeze(0))
state["calibrating"] = False

text = tok(open(os.path.join(data_dir, "wikitext2-valid.txt"), encoding="utf-8").read(),
           return_tensors="pt").input_ids[0][:n_tokens]


def perplexity():
    nll, n = 0.0, 0
    with torch.no_grad():
        for s in range(0, len(text) - 1, 512):
            x = text[s:s + 512].unsqueeze(0)
            if x.shape[1] < 2:
                break
            logp = model(x).logits[0, :-1].log_softmax(-1)
            nll -= logp.gather(1, x[0, 1:, None]).sum().item()
            n += x.shape[1] - 1
    return math.exp(nll / n)


baseline = None
for mode in modes:
    state["mode"] = mode
    p = perplexity()
    baseline = baseline if baseline is not None else p
    print(f"{mode:10s} {p:.4f} {100 * (p / baseline - 1):+.3f}%", flush=True)
