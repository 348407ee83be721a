#!/usr/bin/env python3
"""Golden test: llmctl (f32 weights, CPU) against HF transformers fp32 outputs for the default
model (tests/golden/smollm2_golden.json, made by tests/golden/make_golden.py).

Passes when, for every teacher-forced case, the log-probabilities of the reference's top-20 tokens
at every position differ by at most 2e-3, and every 64-token greedy continuation is identical.
Usage: test_golden.py BUILD_DIR [--device cuda --dtype bf16 --tol 5e-2] [--model DIR --golden FILE]
                      [--cpu-isa ISA [--step-down-only]]
"""
import argparse
import json
import os
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("build")
ap.add_argument("--dtype", default="f32")
ap.add_argument("--tol", type=float, default=2e-3)
ap.add_argument("--model", default="")
ap.add_argument("--device", default="cpu")
ap.add_argument("--quantized-weights", default="auto", help="keep: a GPU runs a GGUF's quantized kernels")
ap.add_argument("--golden", default="", help="another golden file of the same format (e.g. a quantized model's)")
ap.add_argument("--cpu-isa", default="", help="CPU kernels stepped down to this ISA (llmctl --cpu-isa)")
ap.add_argument("--step-down-only", action="store_true", help="skip (77) where --cpu-isa is this CPU's own")
args = ap.parse_args()
if args.step_down_only:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_util import native_isa
    if args.cpu_isa == native_isa():
        print(f"SKIP: this CPU's own kernels are {native_isa()}: the plain entry runs them")
        sys.exit(77)

src = os.environ.get("LLMCTL_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "../.."))
golden_path = args.golden or os.path.join(src, "tests/golden/smollm2_golden.json")
home = os.environ.get("LLMCTL_HOME", os.path.expanduser("~/.cache/llmctl"))
model = args.model or os.path.join(home, "models/SmolLM2-135M-Instruct/hf")
if not os.path.exists(model):
    print(f"SKIP: default model not found at {model} (run scripts/fetch-model.sh --dense)")
    sys.exit(77)

cmd = [os.path.join(args.build, "llmctl_score"), golden_path, "--model", model, "--dtype", args.dtype, "--device", args.device,
       "--quantized-weights", args.quantized_weights] + (["--cpu-isa", args.cpu_isa] if args.cpu_isa else [])
res = subprocess.run(cmd, capture_output=True, text=True)
if res.returncode != 0:
    print(res.stderr)
    sys.exit(1)
ours = json.loads(res.stdout)
golden = json.load(open(golden_path))
failed = False
# Every golden case must come back, in order: a case llmctl_score dropped is a failure, not a pass.
g_names, o_names = [g["name"] for g in golden["cases"]], [o["name"] for o in ours["cases"]]
if g_names != o_names:
    print(f"FAIL: llmctl_score returned cases {o_names}, the golden file has {g_names}")
    sys.exit(1)
for g, o in zip(golden["cases"], ours["cases"]):
    if "top_logprobs" in g:
        worst, where = 0.0, None
        if len(o["logprobs_at_ref_ids"]) != len(g["top_logprobs"]) or any(
                len(a) != len(b) for a, b in zip(g["top_logprobs"], o["logprobs_at_ref_ids"])):
            print(f"{g['name']}: FAIL: {len(o['logprobs_at_ref_ids'])} logprob rows, the reference has "
                  f"{len(g['top_logprobs'])} (or a row of another width)")
            failed = True
            continue
        for p, (ref_row, our_row) in enumerate(zip(g["top_logprobs"], o["logprobs_at_ref_ids"])):
            for k, (a, b) in enumerate(zip(ref_row, our_row)):
                if abs(a - b) > worst:
                    worst, where = abs(a - b), (p, k)
        top1 = sum(1 for gr, orow in zip(g["top_ids"], o["top_ids"]) if gr[0] == orow[0])
        ok = worst <= args.tol
        failed |= not ok
        print(f"{g['name']}: max |dlogprob| over top-20 x {len(g['top_logprobs'])} positions = {worst:.2e} "
              f"at {where} (tol {args.tol}); top-1 agreement {top1}/{len(g['top_ids'])} {'ok' if ok else 'FAIL'}")
    ref, got = g["greedy_ids"], o["greedy_ids"]
    if ref == got:
        print(f"{g['name']}: greedy continuation identical ({len(ref)} tokens)")
    else:
        i = next(i for i, (a, b) in enumerate(zip(ref + [None], got + [None])) if a != b)
        margin = g["greedy_margins"][i] if i < len(g["greedy_margins"]) else None
        print(f"{g['name']}: greedy continuation diverges at step {i}: ref {ref[i:i+5]} ours {got[i:i+5]} "
              f"(reference top-1/top-2 logit margin there: {margin})")
        failed = True
sys.exit(1 if failed else 0)
