#!/usr/bin/env python3
"""Continuous batching on the default model (CPU): batch invariance and preemption.

1. 64 prompts of random lengths (WikiText), half greedy and half seeded sampling with top-3
   logprobs, random max_tokens, run together under a tight token budget, must give exactly the
   outputs (tokens, text, logprobs) of the same requests run one at a time (--max-num-seqs 1).
2. A KV cache too small for the load forces preemptions (counted on stderr); outputs are unchanged
   and no KV block is in use at the end.
3. Bad lines are answered one by one with errors while the others complete.
Usage: test_batching.py BUILD_DIR [LLMCTL FLAGS...]   (e.g. --device cuda --deterministic)
"""
import json
import os
import random
import re
import subprocess
import sys
import tempfile

build = sys.argv[1]
extra = sys.argv[2:]  # added to every llmctl run
src = os.environ.get("LLMCTL_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "../.."))
home = os.environ.get("LLMCTL_HOME", os.path.expanduser("~/.cache/llmctl"))
model = os.path.join(home, "models/SmolLM2-135M-Instruct/hf")
data = os.environ.get("LLMCTL_WIKITEXT") or os.path.join(os.path.dirname(os.path.abspath(src)), "shared/data/wikitext2-valid.txt")
if not os.path.exists(model):
    print(f"SKIP: default model not found at {model}")
    sys.exit(77)
if not os.path.exists(data):
    print(f"SKIP: {data} not found")
    sys.exit(77)

rng = random.Random(1234)
words = open(data, encoding="utf-8").read().split()
reqs = []
for i in range(64):
    start = rng.randrange(len(words) - 400)
    r = {"prompt": " ".join(words[start:start + rng.randint(1, 120)]), "max_tokens": rng.randint(1, 12)}
    if i % 2:
        r.update(temperature=0.9, top_p=0.95, seed=rng.randrange(1 << 30), logprobs=3)
    else:
        r.update(temperature=0)
    reqs.append(r)
bad = ['{"prompt": ""}', '{"prompt": "x", "max_tokens": 0}', '{"prompt": "x", "n": 0}', '{"prompt": "x", "top_p": 0}',
       '{"prompt": "x", "temperature": -1}', '{"prompt": "x", "unknown_field": 1}', '{"prompt": "x", "max_tokens": 9000}',
       'not json']
tmp = tempfile.mkdtemp()
path = os.path.join(tmp, "prompts.jsonl")
with open(path, "w") as f:
    for i, r in enumerate(reqs):
        f.write(json.dumps(r) + "\n")
        if i % 8 == 3:
            f.write(bad[i // 8] + "\n")


def run(*flags):
    cmd = [os.path.join(build, "llmctl"), "generate", "--model", model, "--prompts", path, *extra, *flags]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stderr)
        sys.exit(1)
    return [json.loads(l) for l in p.stdout.splitlines()], p.stderr


solo, _ = run("--max-num-seqs", "1")
batched, err_b = run("--max-num-seqs", "64", "--max-num-batched-tokens", "96")
# 0.012 GB holds 16 blocks of f32 KV on the CPU; bf16 on a GPU halves a block: half the bytes.
tight_gb = "0.006" if "cuda" in extra else "0.012"
tight, err_t = run("--max-num-seqs", "64", "--max-num-batched-tokens", "96", "--kv-cache-gb", tight_gb)
print(err_b.strip())
print(err_t.strip())
failed = False
n_err = sum(1 for o in solo if "error" in o)
if n_err != len(bad) or len(solo) != len(reqs) + len(bad):
    print(f"FAIL: expected {len(bad)} errors among {len(reqs) + len(bad)} results, got {n_err} of {len(solo)}")
    failed = True
for name, other in (("batched", batched), ("preempted", tight)):
    diffs = [i for i, (a, b) in enumerate(zip(solo, other)) if a != b]
    if diffs:
        print(f"FAIL: {name} differs from solo at lines {diffs[:10]}: {solo[diffs[0]]} vs {other[diffs[0]]}")
        failed = True
    else:
        print(f"ok: {name} outputs identical to solo runs ({len(solo)} lines)")
m = re.search(r"(\d+) preemptions", err_t)
if not m or int(m.group(1)) == 0:
    print("FAIL: the small KV cache caused no preemption")
    failed = True
for name, err in (("batched", err_b), ("preempted", err_t)):
    m = re.search(r"KV blocks in use at the end (\d+) of", err)
    if not m or int(m.group(1)) != 0:
        print(f"FAIL: {name}: KV blocks still in use at the end")
        failed = True
# n > 1 through fork: three different samples; child 0 keeps the request's seed, so it equals the
# n = 1 run with the same seed; best_of returns n results.
with open(path, "w") as f:
    base = {"prompt": "Write a short poem about the sea.", "temperature": 1.0, "seed": 11, "max_tokens": 12, "ignore_eos": True}
    f.write(json.dumps(base) + "\n")
    f.write(json.dumps({**base, "n": 3}) + "\n")
    f.write(json.dumps({**base, "n": 2, "best_of": 4, "logprobs": 1}) + "\n")
multi, err_m = run("--max-num-seqs", "8")
one, three, best = (o["outputs"] for o in multi)
ids3 = [o["token_ids"] for o in three]
if len(three) != 3 or three[0]["token_ids"] != one[0]["token_ids"] or len({tuple(x) for x in ids3}) < 2:
    print(f"FAIL: n=3 outputs {ids3} vs n=1 {one[0]['token_ids']}")
    failed = True
elif len(best) != 2 or best[0]["cumulative_logprob"] < best[1]["cumulative_logprob"]:
    print(f"FAIL: best_of=4, n=2 gave {best}")
    failed = True
else:
    print("ok: n=3 gives distinct samples, the first equal to n=1 with the same seed; best_of=4 returns the 2 best")
sys.exit(1 if failed else 0)
