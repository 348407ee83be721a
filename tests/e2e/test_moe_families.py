#!/usr/bin/env python3
"""Mixture-of-experts families against transformers: tiny random models under tests/golden/families/
(made by make_family_goldens.py with transformers, seeded; every expert of every sparse layer is
reached by the golden sequences, recorded as experts_reached), run from their HF directories and from the GGUF llama.cpp's convert_hf_to_gguf.py wrote of each
(qwen3moe, qwen2moe, and Mixtral as llama with stacked ffn_*_exps tensors):
  tiny_qwen3_moe  Qwen3MoeForCausalLM: 16 experts, top 4 renormalized, q/k norms
  tiny_qwen3_moe_dense1  the same with 8 experts, top 2, layer 1 dense (mlp_only_layers; no GGUF: llama.cpp's
                  converter cannot write a dense layer in qwen3moe)
  tiny_mixtral    MixtralForCausalLM: 8 experts (w1/w3/w2), top 2
  tiny_qwen2_moe  Qwen2MoeForCausalLM: 16 experts, top 8 not renormalized, q/k/v biases, a shared expert
                  under its sigmoid gate
Checks per model: top-20 log-probabilities within 1e-4 of transformers fp32 at every position of eight
sequences and 32-token greedy continuations identical; tensor parallel (TP=2 under mpirun: each rank
holds half of every expert's intermediate features, the router replicated) the same; `llmctl generate`
over 6 prompts batched gives each prompt's tokens alone (the routing of a token never depends on the
others in the step).
Quantize (GPTQ per expert): the checkpoint each tiny_<family>_gptq_golden.json's command makes is the one
transformers 4.57 with compressed-tensors scored (same sha256), and llmctl scores it within 1e-3 of that,
on one rank and on two; with a calibration too short to reach every expert, the experts it missed are
written exactly as RTN writes them, and no others. Exits 77 when no fixture is present.
Usage: test_moe_families.py BUILD_DIR
"""
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from family_util import batched_alone, check, compare, counts, failures, score  # noqa: E402


def quantize(model, out, *flags):
    r = subprocess.run([os.path.join(build, "llmctl"), "quantize", model, out, *flags], capture_output=True, text=True,
                       cwd=src, timeout=300)
    check(r.returncode == 0, f"quantize {os.path.basename(model)} {' '.join(flags)}" +
          ("" if r.returncode == 0 else ": " + r.stderr[-800:]))
    return r.stderr if r.returncode == 0 else None


def tensors(path):
    """name -> raw bytes of a safetensors file (its header read directly: no framework needed)."""
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    return {k: data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in header.items()
            if k != "__metadata__"}


def gptq_checks(f, tmp):
    golden_path = os.path.join(FDIR, f"tiny_{f}_gptq_golden.json")
    if not os.path.exists(golden_path):
        return
    golden = json.load(open(golden_path))
    if not os.path.exists(os.path.join(src, "../shared/data/tinyshakespeare.txt")):
        print(f"SKIP tiny_{f}'s GPTQ checks: no ../shared/data/tinyshakespeare.txt (the golden command's calibration)")
        return
    out = os.path.join(tmp, f + "_gptq")
    cmd = golden["command"].replace("OUT", out).split()
    if quantize(*cmd[2:4], *cmd[4:]) is None:
        return
    sha = hashlib.sha256(open(os.path.join(out, "model.safetensors"), "rb").read()).hexdigest()
    check(sha == golden["model_sha256"], f"tiny_{f}: GPTQ checkpoint identical to the golden's ({sha[:16]})")
    compare(f"tiny_{f} GPTQ vs transformers + compressed-tensors", golden, score(build, golden_path, out), tol=1e-3)
    if shutil.which("mpirun"):
        compare(f"tiny_{f} GPTQ TP=2 vs transformers + compressed-tensors", golden, score(build, golden_path, out, tp=2),
                tol=1e-3)


def fallback_checks(tmp):
    """2 calibration tokens reach at most 8 of tiny_qwen3_moe's 16 experts per layer: the others are
    rounded to nearest, byte for byte as --method rtn writes them; the reached ones are not."""
    hf = os.path.join(FDIR, "tiny_qwen3_moe")
    calib = os.path.join(src, "../shared/data/tinyshakespeare.txt")
    if not os.path.exists(calib):
        print(f"SKIP the expert fallback check: no {calib}")
        return
    log = quantize(hf, os.path.join(tmp, "g"), "--method", "gptq", "--group-size", "32", "--calib-samples", "1",
                   "--calib-seq-len", "2", "--calib", calib)
    if quantize(hf, os.path.join(tmp, "r"), "--group-size", "32") is None or log is None:
        return
    m = re.search(r"experts: (\d+) calibrated on their routed tokens, (\d+) rounded to nearest", log)
    check(m is not None, "quantize reports the experts it calibrated and those it rounded")
    if not m:
        return
    calibrated, rounded = int(m.group(1)), int(m.group(2))
    check(calibrated + rounded == 32 and 0 < calibrated <= 16, f"{calibrated} experts calibrated, {rounded} rounded of 32")
    g, r = tensors(os.path.join(tmp, "g", "model.safetensors")), tensors(os.path.join(tmp, "r", "model.safetensors"))
    same = 0
    for layer in range(2):
        for e in range(16):
            names = [f"model.layers.{layer}.mlp.experts.{e}.{p}_proj.{s}" for p in ("gate", "up", "down")
                     for s in ("weight_packed", "weight_scale")]
            same += all(g[n] == r[n] for n in names)
    check(same == rounded, f"the {rounded} experts reported rounded are written as RTN writes them ({same} are)")
    check(all(g[n] == r[n] for n in g if ".mlp.gate." in n), "the routers are written as stored in both")

build = sys.argv[1]
src = os.environ.get("LLMCTL_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "../.."))
FDIR = os.path.join(src, "tests/golden/families")
FAMILIES = ["qwen3_moe", "qwen3_moe_dense1", "mixtral", "qwen2_moe"]
present = [f for f in FAMILIES if os.path.exists(os.path.join(FDIR, f"tiny_{f}_golden.json"))]
if not present:
    print(f"SKIP: no MoE fixture under {FDIR} (tests/golden/families/make_family_goldens.py)")
    sys.exit(77)
for f in present:
    golden_path = os.path.join(FDIR, f"tiny_{f}_golden.json")
    golden = json.load(open(golden_path))
    hf = os.path.join(FDIR, f"tiny_{f}")
    print(f"tiny_{f}: experts reached per sparse layer by the golden sequences: {golden.get('experts_reached')}")
    gguf = os.path.join(FDIR, f"tiny_{f}.gguf")
    for model in (hf, gguf) if os.path.exists(gguf) else (hf,):
        compare(f"{os.path.basename(model)} vs transformers", golden, score(build, golden_path, model))
    if shutil.which("mpirun"):
        compare(f"tiny_{f} TP=2 vs transformers", golden, score(build, golden_path, hf, tp=2))
    batched_alone(build, f"tiny_{f}", hf, golden)
with tempfile.TemporaryDirectory() as tmp:
    for f in present:
        gptq_checks(f, tmp)
    if "qwen3_moe" in present:
        fallback_checks(tmp)
print(f"{counts['passed']} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
