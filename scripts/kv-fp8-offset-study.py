#!/usr/bin/env python3
"""Where an fp8 (e4m3) KV cache loses accuracy, measured with transformers (the reference), to
choose what llmctl's fp8 cache should do. Each mode rounds the cached keys (after rope) and values
of every layer the way a cache would, and scores WikiText-2 in windows of 512 tokens:

  none        f32 cache (the baseline)
  bf16        keys and values rounded to bf16 (a 16-bit cache)
  fp8         keys and values rounded to e4m3 with scale 1.0 (llmctl's uncalibrated fp8 cache)
  fp8-kmean   fp8, keys stored minus a per-channel mean (per layer, kv head and dimension), never
              added back: q.mean is the same for every key of a query, so softmax cancels it
  fp8-vmean   fp8, values stored minus their per-channel mean, added back to the attention output
              (the probabilities sum to 1): llmctl's kv_cache_value_offsets.json
  fp8-kvmean  both
  MODE-sink   the fp8 mode with each window's first token's keys and values left exact (the
              attention sink: most heads put much of their weight on it, and its rounding error is
              the same in every window)
  MODE-sinkN  the same with the first N tokens exact
  MODE-recentW  each query's last W keys and values (itself included) exact, older ones rounded
  MODE-blockB   the keys and values of the query's own block of B positions exact (a paged cache
              that keeps each sequence's open block in full precision)
  MODE@R      the fp8 modes with calibrated per-head scales (amax / 448 on the calibration text, the
              values' about their mean where subtracted) times 2^R: R moves the e4m3 grid against
              the values (R = 0, 0.25, 0.5, 0.75 are four alignments of the same range), to tell a
              systematic gain from the luck of one grid

For each mode: perplexity, its change against the baseline, and the mean KL divergence of the
next-token distributions from the baseline's (a positive number per token, so less noisy than a
perplexity difference). The means and maxima are calibrated on 8 samples of 512 tokens of
tinyshakespeare (not the scored text).
Usage: /work/venv-ref/bin/python scripts/kv-fp8-offset-study.py MODEL_DIR SHARED_DATA_DIR TOKENS MODES
  e.g. ... ~/.cache/llmctl/models/SmolLM2-135M-Instruct/hf ../shared/data 4096 none,fp8@0,fp8-vmean@0,fp8-sink@0
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
calib = {}  # (layer, "k" | "v") -> list of [tokens, kv heads, head dim] (keys after rope)


def stats(layer, which):
    """(mean [1, kv heads, 1, D], amax [1, kv heads, 1, 1], centered amax) over the calibration text."""
    key = ("stats", layer, which)
    if key not in calib:
        x = torch.cat(calib[(layer, which)])  # [tokens, kv heads, D]
        m = x.mean(dim=0)
        calib[key] = (m[None, :, None, :], x.abs().amax(dim=(0, 2))[None, :, None, None],
                      (x - m).abs().amax(dim=(0, 2))[None, :, None, None])
    return calib[key]


def e4m3(x, scale):
    return (x / scale).clamp(-448, 448).to(torch.float8_e4m3fn).to(torch.float32) * scale


def cached_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kw):
    layer, mode = module.layer_idx, state["mode"]
    if state["calibrating"]:  # key, value: [batch, kv heads, tokens, head dim], keys after rope
        for which, x in (("k", key), ("v", value)):
            calib.setdefault((layer, which), []).append(x.transpose(1, 2).reshape(-1, x.shape[1], x.shape[3]))
    elif mode == "bf16":
        key, value = key.to(torch.bfloat16).float(), value.to(torch.bfloat16).float()
    elif mode.startswith("fp8"):
        base, _, r = mode.partition("@")
        base, sink, recent = parse_exact(base)
        out = []
        for which, x in (("k", key), ("v", value)):
            mean, amax, centered = stats(layer, which)
            centre = base == "fp8-kvmean" or base == f"fp8-{which}mean"
            off = mean if centre else 0
            scale = (centered if centre else amax) / 448 * 2 ** float(r) if r else 1.0
            q = e4m3(x - off, scale) + (off if which == "v" else 0)
            if sink:
                q[:, :, :sink] = x[:, :, :sink]
            out.append(q)
        if recent:
            return recent_exact_attention(module, query, key, value, out, attention_mask, scaling, recent)
        key, value = out
    elif mode != "none":
        raise SystemExit("unknown mode " + mode)
    return reference_attention(module, query, key, value, attention_mask, scaling, dropout, **kw)


def parse_exact(base):
    """'fp8-sink4-recent64' -> ('fp8', 4, 64); a bare '-sink' is one token; '-blockB' -> -B (a
    window of the query's own block of B positions, rather than its last W)."""
    sink = recent = 0
    while True:
        stem, _, last = base.rpartition("-")
        if last.startswith("sink") and stem:
            sink, base = int(last[4:] or 1), stem
        elif last.startswith("recent") and stem:
            recent, base = int(last[6:]), stem
        elif last.startswith("block") and stem:
            recent, base = -int(last[5:]), stem
        else:
            return base, sink, recent


def recent_exact_attention(module, query, key, value, rounded, attention_mask, scaling, window):
    """Attention where each query reads its last `window` keys and values (itself included) exact
    and older ones rounded: a cache that keeps a full-precision window of recent tokens."""
    groups = query.shape[1] // key.shape[1]
    k, v = key.repeat_interleave(groups, 1), value.repeat_interleave(groups, 1)
    kq, vq = (t.repeat_interleave(groups, 1) for t in rounded)
    t = query.shape[2]
    i = torch.arange(t)[:, None]
    j = torch.arange(t)[None, :]
    near = (i - j < window) if window > 0 else (i // -window == j // -window)
    scores = torch.where(near, query @ k.transpose(2, 3), query @ kq.transpose(2, 3)) * scaling
    if attention_mask is not None:
        scores = scores + attention_mask[:, :, :, :t]
    p = scores.softmax(-1)
    out = (p * near) @ v + (p * ~near) @ vq
    return out.transpose(1, 2).contiguous(), p


llama.eager_attention_forward = cached_attention
if hasattr(llama, "ALL_ATTENTION_FUNCTIONS"):
    llama.ALL_ATTENTION_FUNCTIONS["eager"] = cached_attention

calib_ids = tok(open(os.path.join(data_dir, "tinyshakespeare.txt"), encoding="utf-8").read(),
                return_tensors="pt").input_ids[0]
rng = random.Random(0)
state["calibrating"] = True
with torch.no_grad():
    for s in [rng.randrange(len(calib_ids) - 512) for _ in range(8)]:
        model(calib_ids[s:s + 512].unsqueeze(0))
state["calibrating"] = False

text = tok(open(os.path.join(data_dir, "wikitext2-valid.txt"), encoding="utf-8").read(),
           return_tensors="pt").input_ids[0][:n_tokens]
nll = {m: 0.0 for m in modes}
kl = {m: 0.0 for m in modes}
n = 0
with torch.no_grad():
    for s in range(0, len(text) - 1, 512):
        x = text[s:s + 512].unsqueeze(0)
        if x.shape[1] < 2:
            break
        state["mode"] = "none"
        base = model(x).logits[0, :-1].log_softmax(-1)
        for m in modes:
            state["mode"] = m
            logp = base if m == "none" else model(x).logits[0, :-1].log_softmax(-1)
            nll[m] -= logp.gather(1, x[0, 1:, None]).sum().item()
            kl[m] += (base.exp() * (base - logp)).sum().item()
        n += x.shape[1] - 1
ref = math.exp(nll[modes[0]] / n)
for m in modes:
    p = math.exp(nll[m] / n)
    print(f"{m:16s} ppl {p:.4f} {100 * (p / ref - 1):+.3f}%  mean KL {kl[m] / n:.6f}", flush=True)
