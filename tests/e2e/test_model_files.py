#!/usr/bin/env python3
"""Hostile or broken model files through the CLI: `llmctl convert` (and `generate`) must exit
non-zero with a message naming the problem, never crash and never succeed silently. A valid tiny
checkpoint converts, and one whose embedding is padded past its tokenizer loads and generates.
Needs no downloaded model: every checkpoint is written here (safetensors by hand, f32 zeros).
Usage: test_model_files.py BUILD_DIR
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

build = sys.argv[1]
LLMCTL = os.path.join(build, "llmctl")
failures = []

# hidden 8, 2 heads of 4, 1 kv head, 2 layers, ffn 16; vocab 260 (a 256-token byte-level tokenizer:
# 4 padding rows).
H, NH, NKV, HD, FF, L, V = 8, 2, 1, 4, 16, 2, 260


def config(**over):
    c = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": H,
         "num_hidden_layers": L, "num_attention_heads": NH, "num_key_value_heads": NKV, "head_dim": HD,
         "intermediate_size": FF, "vocab_size": V, "max_position_embeddings": 64,
         "tie_word_embeddings": True, "rms_norm_eps": 1e-5}
    c.update(over)
    return c


def weights():
    w = {"model.embed_tokens.weight": [V, H], "model.norm.weight": [H]}
    for i in range(L):
        p = "model.layers.%d." % i
        w.update({p + "input_layernorm.weight": [H], p + "post_attention_layernorm.weight": [H],
                  p + "self_attn.q_proj.weight": [NH * HD, H], p + "self_attn.k_proj.weight": [NKV * HD, H],
                  p + "self_attn.v_proj.weight": [NKV * HD, H], p + "self_attn.o_proj.weight": [H, NH * HD],
                  p + "mlp.gate_proj.weight": [FF, H], p + "mlp.up_proj.weight": [FF, H],
                  p + "mlp.down_proj.weight": [H, FF]})
    return w


def write_safetensors(path, tensors):
    header, off = {}, 0
    for name, shape in tensors.items():
        n = 4
        for d in shape:
            n *= d
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + n]}
        off += n
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"\0" * off)


def byte_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def tokenizer(added=(), extra_vocab=0, pre=None):
    u = byte_unicode()
    vocab = {u[b]: b for b in range(256)}
    for i in range(extra_vocab):
        vocab["x%d" % i] = 256 + i
    return {"version": "1.0", "added_tokens": list(added), "normalizer": None,
            "pre_tokenizer": pre or {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
            "post_processor": None, "decoder": {"type": "ByteLevel"},
            "model": {"type": "BPE", "vocab": vocab, "merges": []}}


def checkpoint(name, cfg=None, w=None, tok=None, tok_text=None):
    d = os.path.join(TMP, name)
    os.makedirs(d)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg or config(), f)
    write_safetensors(os.path.join(d, "model.safetensors"), weights() if w is None else w)
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        f.write(tok_text if tok_text is not None else json.dumps(tok or tokenizer()))
    return d


def run(args):
    p = subprocess.run([LLMCTL] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    return p.returncode, p.stderr.decode(errors="replace")


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what + ("" if cond else ": " + detail[:400]))
    if not cond:
        failures.append(what)


def refused(name, path, pattern):
    """convert must exit non-zero (not by a signal) with `pattern` on stderr, writing nothing."""
    out = os.path.join(TMP, name + ".out")
    rc, err = run(["convert", path, out])
    check(0 < rc < 128 and pattern in err and not os.path.exists(os.path.join(out, "model.safetensors")),
          "convert refuses " + name, "exit %d, stderr: %s" % (rc, err))


TMP = tempfile.mkdtemp()
try:
    good = checkpoint("good")
    rc, err = run(["convert", good, os.path.join(TMP, "good.out")])
    check(rc == 0, "convert accepts a valid tiny checkpoint", err)

    w = weights()
    del w["model.norm.weight"]
    refused("missing-norm", checkpoint("missing-norm", w=w), "model.norm.weight")
    for n in (1, 0):
        w = weights()
        w["model.norm.weight"] = [n]
        refused("norm-%d-element" % n, checkpoint("norm-%d" % n, w=w),
                "model.norm.weight has shape [%d], expected [8]" % n)
    for name, shape in (("model.layers.0.self_attn.o_proj.weight", [H, 4]), ("model.layers.1.mlp.down_proj.weight", [H, 8]),
                        ("model.layers.0.mlp.gate_proj.weight", [8, H])):
        w = weights()
        w[name] = shape
        short = name.split(".")[-2]
        refused("wrong-" + short, checkpoint("wrong-" + short, w=w), name + " has shape")
    w = weights()
    w["lm_head.weight"] = [V - 1, H]
    refused("wrong-lm_head", checkpoint("wrong-lm_head", cfg=config(tie_word_embeddings=False), w=w),
            "lm_head.weight has shape [259, 8], expected [260, 8]")
    refused("layers-1e9", checkpoint("layers-1e9", cfg=config(num_hidden_layers=1000000000)),
            "num_hidden_layers = 1000000000")
    refused("attention-bias", checkpoint("attention-bias", cfg=config(attention_bias=True)),
            "self_attn.q_proj.bias")
    refused("tokenizer-larger", checkpoint("tokenizer-larger", tok=tokenizer(extra_vocab=10)),
            "more than the model's vocabulary (260)")
    refused("added-id-2^31-1", checkpoint("added-id", tok=tokenizer(added=[
        {"id": 2**31 - 1, "content": "<x>", "special": True}])), "2147483647")
    tok = tokenizer()
    tok["model"]["vocab"]["zz"] = 20000000
    refused("vocab-id-20M", checkpoint("vocab-id", tok=tok), "has id 20000000")
    deep = '{"type": "Sequence", "pretokenizers": [' * 100000 + "{}" + "]}" * 100000
    text = json.dumps(tokenizer()).replace('"pre_tokenizer": {', '"pre_tokenizer": ' + deep + ', "unused": {', 1)
    refused("pre_tokenizer-100k-deep", checkpoint("deep", tok_text=text), "nested deeper")

    # Padded embedding rows past the tokenizer: loads with a note, and generates.
    rc, err = run(["generate", "--model", good, "-n", "4", "--temperature", "0", "hello"])
    check(rc == 0 and "never sampled" in err, "generate runs a model padded past its tokenizer, with a note",
          "exit %d, stderr: %s" % (rc, err))
finally:
    shutil.rmtree(TMP, ignore_errors=True)

print("%d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
