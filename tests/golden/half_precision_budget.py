#!/usr/bin/env python3
"""Where a half-precision forward of the default model loses accuracy: a numpy fp32 re-implementation
of the Llama forward (from the `llmctl convert` output) that rounds to bf16 or f16 at chosen points,
scored like tests/e2e/test_golden.py (max |dlogprob| over the reference's top-20 at 64 teacher-forced
positions, against HF transformers fp32 in tests/golden/smollm2_golden.json).

Rounding points (what llmctl's CUDA backend stores in the compute dtype):
  W    weights and the embedding table          X    GEMM inputs (norm outputs, attention output, silu*up)
  Q    query after the qkv GEMM and RoPE         KV   keys and values (the paged cache)
  P    softmax probabilities before P V (the prefill kernel's tensor-core P V)
  MLP  gate/up GEMM outputs before silu*up      OUT  o-proj and down-proj outputs before the residual add
  RES  the residual stream itself (llmctl keeps it in f32; HF's half-precision run does not)
With nothing rounded the script reproduces the fp32 golden (a check of the re-implementation).
Needs numpy. Usage: python3 tests/golden/half_precision_budget.py [--dtype bf16|f16] [HF_DIR]
"""
import argparse
import json
import os
import struct

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("hf_dir", nargs="?", default=os.path.join(
    os.environ.get("LLMCTL_HOME", os.path.expanduser("~/.cache/llmctl")), "models/SmolLM2-135M-Instruct/hf"))
ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16"])
args = ap.parse_args()


def round_bf16(a):  # round to nearest even, as __float2bfloat16_rn
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.view(np.float32)


def rnd(a):
    return round_bf16(a) if args.dtype == "bf16" else a.astype(np.float16).astype(np.float32)


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", (name, info["dtype"])
        b, e = info["data_offsets"]
        out[name] = np.frombuffer(data[b:e], dtype=np.float32).reshape(info["shape"])
    return out


cfg = json.load(open(os.path.join(args.hf_dir, "config.json")))
W = load_safetensors(os.path.join(args.hf_dir, "model.safetensors"))
H, L, Hq, Hkv = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
D = cfg.get("head_dim", H // Hq)
eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]


def forward(ids, points):
    r = {p: (rnd if p in points else (lambda a: a)) for p in ("W", "X", "Q", "KV", "P", "MLP", "OUT", "RES")}
    w = lambda name: r["W"](W[name])
    T = len(ids)
    pos = np.arange(T, dtype=np.float64)
    inv = 1.0 / theta ** (np.arange(0, D, 2, dtype=np.float64) / D)
    ang = np.outer(pos, inv)
    cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)

    def rope(x):  # [T, heads, D], rotate-half layout
        x1, x2 = x[..., : D // 2], x[..., D // 2:]
        c, s = cos[:, None, :], sin[:, None, :]
        return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)

    def norm(x, g):
        return x / np.sqrt(np.mean(x.astype(np.float64) ** 2, axis=-1, keepdims=True) + eps).astype(np.float32) * g

    emb = w("model.embed_tokens.weight")
    h = emb[ids].astype(np.float32)
    mask = np.triu(np.full((T, T), -np.inf, dtype=np.float32), 1)
    for l in range(L):
        p = f"model.layers.{l}."
        x = r["X"](norm(h, w(p + "input_layernorm.weight")))
        q = (x @ w(p + "self_attn.q_proj.weight").T).reshape(T, Hq, D)
        k = (x @ w(p + "self_attn.k_proj.weight").T).reshape(T, Hkv, D)
        v = (x @ w(p + "self_attn.v_proj.weight").T).reshape(T, Hkv, D)
        q, k, v = r["Q"](rope(r["Q"](q))), r["KV"](rope(r["KV"](k))), r["KV"](v)
        k, v = np.repeat(k, Hq // Hkv, axis=1), np.repeat(v, Hq // Hkv, axis=1)
        s = np.einsum("thd,shd->hts", q, k) / np.float32(np.sqrt(D)) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        s = s / s.sum(-1, keepdims=True)
        a = r["X"](np.einsum("hts,shd->thd", r["P"](s), v).reshape(T, Hq * D))
        h = r["RES"](h + r["OUT"](a @ w(p + "self_attn.o_proj.weight").T))
        x = r["X"](norm(h, w(p + "post_attention_layernorm.weight")))
        g, u = r["MLP"](x @ w(p + "mlp.gate_proj.weight").T), r["MLP"](x @ w(p + "mlp.up_proj.weight").T)
        m = r["X"](g / (1 + np.exp(-g)) * u)
        h = r["RES"](h + r["OUT"](m @ w(p + "mlp.down_proj.weight").T))
    x = r["X"](norm(h, w("model.norm.weight")))
    lm = w("lm_head.weight") if "lm_head.weight" in W else emb
    logits = (x @ lm.T).astype(np.float64)
    return logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) - logits.max(-1, keepdims=True)


golden = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "smollm2_golden.json")))
cases = [c for c in golden["cases"] if "input_ids" in c]
configs = [
    ("none (fp32 re-implementation)", set()),
    ("W", {"W"}),
    ("W X", {"W", "X"}),
    ("W Q", {"W", "Q"}),
    ("W KV", {"W", "KV"}),
    ("W P", {"W", "P"}),
    ("W MLP", {"W", "MLP"}),
    ("W OUT", {"W", "OUT"}),
    ("W X KV", {"W", "X", "KV"}),
    ("W X KV P (avoidable ones kept f32)", {"W", "X", "KV", "P"}),
    ("W X Q KV P MLP OUT (llmctl CUDA)", {"W", "X", "Q", "KV", "P", "MLP", "OUT"}),
    ("W X Q KV P MLP (o/down outputs f32)", {"W", "X", "Q", "KV", "P", "MLP"}),
    ("all + RES (residual in half too)", {"W", "X", "Q", "KV", "P", "MLP", "OUT", "RES"}),
]
print(f"dtype {args.dtype}; max |dlogprob| over the reference top-20 x 64 positions, per case")
print(f"{'rounded at':40s} " + " ".join(f"{c['name']:>12s}" for c in cases))
for label, pts in configs:
    worst = []
    for c in cases:
        lp = forward(np.array(c["input_ids"]), pts)
        worst.append(max(abs(lp[p, i] - v) for p in range(len(c["top_ids"]))
                         for i, v in zip(c["top_ids"][p], c["top_logprobs"][p])))
    print(f"{label:40s} " + " ".join(f"{x:12.3e}" for x in worst), flush=True)
