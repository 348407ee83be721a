#!/usr/bin/env python3
"""prompt_logprobs through the batching engine against HF transformers (golden file).

Every golden case's 64 input ids go in as a token-id prompt with prompt_logprobs=20, together in
one batch under a small token budget (so prompts are prefilled in chunks mixed with each other),
each case twice: the second copy would hit the prefix cache, which a prompt_logprobs request
must bypass. Entry p scores prompt token p given tokens < p, which is the golden row p - 1: the
logprobs of the reference's top-20 ids must agree within 2e-3 (f32 on CPU), the top-1 ids must
match, and entry 0 must be null.
Usage: test_prompt_logprobs.py BUILD_DIR [LLMCTL FLAGS...]
"""
import json
import os
import subprocess
import sys
import tempfile

build = sys.argv[1]
extra = sys.argv[2:]
src = os.environ.get("LLMCTL_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "../.."))
home = os.environ.get("LLMCTL_HOME", os.path.expanduser("~/.cache/llmctl"))
model = os.path.join(home, "models/SmolLM2-135M-Instruct/hf")
if not os.path.exists(model):
    print(f"SKIP: default model not found at {model}")
    sys.exit(77)
golden = json.load(open(os.path.join(src, "tests/golden/smollm2_golden.json")))
cases = [c for c in golden["cases"] if "top_logprobs" in c]
assert cases, "no teacher-forced cases in the golden file"

path = os.path.join(tempfile.mkdtemp(), "prompts.jsonl")
with open(path, "w") as f:
    for c in cases + cases:
        f.write(json.dumps({"prompt": c["input_ids"], "prompt_logprobs": 20, "max_tokens": 1, "temperature": 0}) + "\n")
    f.write(json.dumps({"prompt": [0, 1, 10 ** 9], "prompt_logprobs": 1}) + "\n")  # an id out of range
    f.write(json.dumps({"prompt": cases[0]["input_ids"], "prompt_logprobs": 21}) + "\n")  # over the limit
cmd = [os.path.join(build, "llmctl"), "generate", "--model", model, "--prompts", path, "--max-num-batched-tokens", "48",
       *extra]
p = subprocess.run(cmd, capture_output=True, text=True)
if p.returncode != 0:
    print(p.stderr)
    sys.exit(1)
lines = [json.loads(l) for l in p.stdout.splitlines()]
assert len(lines) == 2 * len(cases) + 2, len(lines)
failed = False
for i, (c, o) in enumerate(zip(cases + cases, lines)):
    pl = o["prompt_logprobs"]
    ids = c["input_ids"]
    assert len(pl) == len(ids) and pl[0] is None, (len(pl), pl[0])
    worst = 0.0
    top1 = 0
    for pos in range(1, len(ids)):
        e = pl[pos]
        assert e["token_id"] == ids[pos]
        ours = {t["token_id"]: t["logprob"] for t in e["top_logprobs"]}
        assert len(ours) == 20
        ref_ids, ref_lps = c["top_ids"][pos - 1], c["top_logprobs"][pos - 1]
        top1 += e["top_logprobs"][0]["token_id"] == ref_ids[0]
        for rid, rlp in zip(ref_ids, ref_lps):
            if rid in ours:
                worst = max(worst, abs(ours[rid] - rlp))
            if rid == ids[pos]:
                worst = max(worst, abs(e["logprob"] - rlp))
        # the top-20 sets may differ only at near-ties in the tail
        missing = [rlp for rid, rlp in zip(ref_ids, ref_lps) if rid not in ours]
        assert all(abs(m - min(ours.values())) < 2e-3 for m in missing), (pos, missing)
    ok = worst <= 2e-3 and top1 == len(ids) - 1
    failed |= not ok
    print(f"{c['name']} (copy {i // len(cases)}): {len(ids) - 1} prompt positions, max |dlogprob| {worst:.2e}, "
          f"top-1 agreement {top1}/{len(ids) - 1} {'ok' if ok else 'FAIL'}")
for o, what in zip(lines[-2:], ["token id out of range", "prompt_logprobs over 20"]):
    assert "error" in o, o
    print(f"rejected ({what}): {o['error']['message']}")
sys.exit(1 if failed else 0)
