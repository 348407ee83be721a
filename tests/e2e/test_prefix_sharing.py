#!/usr/bin/env python3
"""Prefix sharing through the batching engine (`generate --prompts`, default model):

1. 20 requests sharing a ~200-token prefix: the prefix's full blocks are computed once and found in
   the cache by the 19 others (prefix hit rate reported on stderr and asserted), and the outputs equal
   those of the same requests run with the cache of each one alone.
2. n=4 shares the prompt's blocks: the peak of KV blocks in use is about one copy of the prompt plus
   a few blocks per child, far below four copies.
Usage: test_prefix_sharing.py BUILD_DIR [LLMCTL FLAGS...]
"""
import json
import os
import re
import subprocess
import sys
import tempfile

build = sys.argv[1]
extra = sys.argv[2:]
src = os.environ.get("LLMCTL_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "../.."))
home = os.environ.get("LLMCTL_HOME", os.path.expanduser("~/.cache/llmctl"))
model = os.path.join(home, "models/SmolLM2-135M-Instruct/hf")
data = os.path.join(os.path.dirname(os.path.abspath(src)), "shared/data/wikitext2-valid.txt")
if not os.path.exists(model) or not os.path.exists(data):
    print(f"SKIP: {model} or {data} not found")
    sys.exit(77)

words = open(data, encoding="utf-8").read().split()
prefix = " ".join(words[1000:1150])  # about 200 tokens
tmp = tempfile.mkdtemp()


def run(reqs, *flags):
    path = os.path.join(tmp, "reqs.jsonl")
    with open(path, "w") as f:
        for r in reqs:
            f.write(json.dumps(r) + "\n")
    cmd = [os.path.join(build, "llmctl"), "generate", "--model", model, "--prompts", path, *extra, *flags]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stderr)
        sys.exit(1)
    return [json.loads(l) for l in p.stdout.splitlines()], p.stderr


def stat(err, pattern):
    m = re.search(pattern, err)
    if not m:
        print(f"FAIL: '{pattern}' not in stderr: {err}")
        sys.exit(1)
    return m.groups()


failed = False
reqs = [{"prompt": f"{prefix}\nQuestion {i}: what is {i} plus {i}?", "max_tokens": 6, "temperature": 0}
        for i in range(20)]
shared, err = run(reqs, "--max-num-seqs", "20", "--max-num-batched-tokens", "256")
solo, err_solo = run(reqs, "--max-num-seqs", "1")
prompt_tokens = sum(o["prompt_tokens"] for o in shared)
(hit,) = stat(err, r"prefix hit rate ([\d.]+)%")
hit = float(hit) / 100
# The prefix's full 16-token blocks (at least 11 of its ~200 tokens' 12) are found by 19 requests.
want = 19 * 11 * 16 / prompt_tokens
print(f"20 requests, {prompt_tokens} prompt tokens: prefix hit rate {hit:.3f} (at least {want:.3f} expected)")
print(err.strip())
if hit < want:
    print("FAIL: the shared prefix was not found in the cache")
    failed = True
if [o["outputs"] for o in shared] != [o["outputs"] for o in solo]:
    print("FAIL: outputs with prefix sharing differ from one-at-a-time runs")
    failed = True
else:
    print("ok: outputs with a shared prefix equal one-at-a-time outputs")

# n=4 on one long prompt: one copy of the prompt's blocks plus the children's own.
long_prompt = " ".join(words[3000:3230])
outs, err = run([{"prompt": long_prompt, "n": 4, "max_tokens": 8, "temperature": 1.0, "seed": 5, "ignore_eos": True}],
                "--kv-cache-gb", "0.2")
ptoks = outs[0]["prompt_tokens"]
peak, total = stat(err, r"peak KV use ([\d.]+)%.*of (\d+)")
peak_blocks = round(float(peak) / 100 * int(total))
one_copy = -(-(ptoks + 8) // 16)
print(f"n=4, prompt {ptoks} tokens: peak {peak_blocks} blocks in use; one sequence needs {one_copy}, four copies {4 * one_copy}")
if len(outs[0]["outputs"]) != 4 or peak_blocks > one_copy + 4 * 2:
    print("FAIL: n=4 did not share the prompt's blocks")
    failed = True
else:
    print("ok: n=4 uses the prompt's blocks once (plus at most 2 blocks per child)")
sys.exit(1 if failed else 0)
