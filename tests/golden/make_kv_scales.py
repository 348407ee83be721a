#!/usr/bin/env python3
"""Calibrated fp8 KV cache scales for the default model (SmolLM2-135M-Instruct), the fixture
tests/e2e/test_kv_cache_dtype.py scores with: per layer and kv head, scale = amax / 448 (e4m3's
largest value) over 8 samples of 512 tokens of tinyshakespeare (not the scored WikiText).
v: amax of v_proj's output. k: the largest |k| any rotary angle can give, max over the rotated
pairs (i, i + D/2) of sqrt(k_i^2 + k_{i+D/2}^2), from k_proj's output before rope; so no rotated key
saturates. Writes tests/golden/smollm2_kv_scales.json.
Usage: /work/venv-ref/bin/python tests/golden/make_kv_scales.py MODEL_DIR TINYSHAKESPEARE
"""
import json
import os
import random
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

model_dir, text_path = sys.argv[1], sys.argv[2]
tok = AutoTokenizer.from_pretrained(model_dir)
model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32).eval()
cfg = model.config
hkv, d = cfg.num_key_value_heads, cfg.hidden_size // cfg.num_attention_heads
ids = tok(open(text_path, encoding="utf-8").read(), return_tensors="pt").input_ids[0]
rng = random.Random(0)
starts = [rng.randrange(len(ids) - 512) for _ in range(8)]
amax = {}


def hook(layer, which):
    def f(_module, _inp, out):
        x = out.detach().reshape(-1, hkv, d)
        if which == "k":
            x = torch.sqrt(x[..., : d // 2] ** 2 + x[..., d // 2:] ** 2)
        m = x.abs().amax(dim=(0, 2))
        key = (layer, which)
        amax[key] = torch.maximum(amax[key], m) if key in amax else m
    return f


for i, layer in enumerate(model.model.layers):
    layer.self_attn.k_proj.register_forward_hook(hook(i, "k"))
    layer.self_attn.v_proj.register_forward_hook(hook(i, "v"))
with torch.no_grad():
    for s in starts:
        model(ids[s:s + 512].unsqueeze(0))
out = {"model": os.path.basename(os.path.normpath(model_dir)), "samples": len(starts), "seq_len": 512,
       "layers": [{"k_scale": (amax[(i, "k")] / 448).tolist(), "v_scale": (amax[(i, "v")] / 448).tolist()}
                  for i in range(cfg.num_hidden_layers)]}
dst = os.path.join(os.path.dirname(os.path.abspath(__file__)), "smollm2_kv_scales.json")
with open(dst, "w") as f:
    json.dump(out, f, indent=1)
print("wrote", dst)
