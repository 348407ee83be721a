#!/usr/bin/env python3
"""What an int8 / fp8 KV cache costs the default model's perplexity outside llmctl: transformers in
fp32 with every key (after rope) and value rounded as llmctl's caches store them -- int8 asymmetric
per token and head (zero = min, scale = (max - min) / 255), fp8 through torch's float8_e4m3fn (RNE,
saturated at +-448) with scale 1.0 or the calibrated per-head scales of smollm2_kv_scales.json.
Strided windows as `llmctl bench ppl --ctx 512 --stride 256` (the first window scores every token,
later ones their last 256). Evidence beside tests/e2e/test_kv_cache_dtype.py; not run in CI.
Measured (4096 tokens, 2026-11-24): unquantized 15.1959; int8 +0.074%; fp8 +0.298%; fp8 calibrated
+0.616% (llmctl: 15.1960, -0.029%, +0.746%, +0.651%). fp8 results are chaotic at this model size:
jittering the keys by 1e-6 (relative) before rounding moves the 512-token perplexity by ~1%.
Usage: /work/venv-ref/bin/python tests/golden/kv_quant_reference_ppl.py MODEL_DIR WIKITEXT [TOKENS]
"""
import json
import math
import os
import sys

import torch
import transformers.models.llama.modeling_llama as llama
from transformers import AutoModelForCausalLM, AutoTokenizer

model_dir, text_path = sys.argv[1], sys.argv[2]
n_tokens = int(sys.argv[3]) if len(sys.argv) > 3 else 4096
tok = AutoTokenizer.from_pretrained(model_dir)
model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
cfg = model.config
hkv, d = cfg.num_key_value_heads, cfg.hidden_size // cfg.num_attention_heads
ids = tok(open(text_path, encoding="utf-8").read(), return_tensors="pt").input_ids[0][:n_tokens]
scales = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "smollm2_kv_scales.json")))["layers"]
mode = {"kind": None, "calibrated": False, "layer": 0}


def quantize(x, layer, which):  # x [..., Hkv, D] -> the values the cache would hand back
    if mode["kind"] == "int8":
        lo, hi = x.amin(-1, keepdim=True), x.amax(-1, keepdim=True)
        s = (hi - lo) / 255
        return torch.round((x - lo) / torch.where(s > 0, s, 1)).clamp(0, 255) * s + lo
    s = torch.tensor(scales[layer][which]).view(hkv, 1) if mode["calibrated"] else torch.ones(hkv, 1)
    return (x / s).clamp(-448, 448).to(torch.float8_e4m3fn).to(torch.float32) * s


rope = llama.apply_rotary_pos_emb


def rope_then_quantize(q, k, cos, sin, *args, **kw):  # k [B, Hkv, T, D]
    q, k = rope(q, k, cos, sin, *args, **kw)
    if mode["kind"]:
        k = quantize(k.transpose(1, 2), mode["layer"], "k_scale").transpose(1, 2)
    return q, k


llama.apply_rotary_pos_emb = rope_then_quantize


def v_hook(i):
    def f(_m, _inp, out):
        mode["layer"] = i  # k_proj and v_proj run before rope in each layer
        if not mode["kind"]:
            return out
        return quantize(out.reshape(*out.shape[:-1], hkv, d), i, "v_scale").reshape(out.shape)
    return f


for i, layer in enumerate(model.model.layers):
    layer.self_attn.v_proj.register_forward_hook(v_hook(i))


def perplexity(ctx=512, stride=256):
    nll, n = 0.0, 0
    for b in range(0, len(ids), stride):
        e = min(b + ctx, len(ids))
        w = ids[b:e]
        with torch.no_grad():
            lp = model(w.unsqueeze(0)).logits[0].log_softmax(-1)
        first = 1 if b == 0 else ctx - stride
        for p in range(first, len(w)):
            nll -= lp[p - 1, w[p]].item()
            n += 1
        if e == len(ids):
            break
    return math.exp(nll / n)


base = perplexity()
print(f"{len(ids)} tokens, unquantized: ppl {base:.4f}")
for kind, cal in (("int8", False), ("fp8", False), ("fp8", True)):
    mode["kind"], mode["calibrated"] = kind, cal
    p = perplexity()
    print(f"{kind}{' calibrated' if cal else ''}: ppl {p:.4f} ({100 * (p - base) / base:+.3f}%)")
