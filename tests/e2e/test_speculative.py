#!/usr/bin/env python3
"""Speculative decoding by prompt lookup (`--speculative-ngram K`) on the default model (CPU):

1. `generate` (one prompt) with the n-gram proposer gives the same tokens as without, greedy and
   seeded sampling, on prompts that ask the model to repeat text (where drafts get accepted);
   the acceptance rate is printed, and some drafts must have been accepted.
2. `generate --prompts` (the batching engine, several sequences per step, n = 2, logprobs) equals
   the same requests without drafts.
Usage: test_speculative.py BUILD_DIR [LLMCTL FLAGS...]
"""
import json
import os
import subprocess
import sys
import tempfile

build = sys.argv[1]
extra = sys.argv[2:]
home = os.environ.get("LLMCTL_HOME", os.path.expanduser("~/.cache/llmctl"))
model = os.path.join(home, "models/SmolLM2-135M-Instruct/hf")
if not os.path.exists(model):
    print(f"SKIP: {model} not found")
    sys.exit(77)
llmctl = os.path.join(build, "llmctl")

PROMPTS = [
    "Repeat this list exactly: apples, pears, plums, cherries, grapes, lemons, limes, figs, dates, kiwis.",
    "Copy this code:\ndef add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n",
    "Say 'one two three four five' three times.",
]
failed = False


def generate(prompt, *flags):
    cmd = [llmctl, "generate", "--model", model, "--chat", "--json", "-n", "64", *extra, *flags, prompt]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stderr)
        sys.exit(1)
    return json.loads(p.stdout.splitlines()[-1])


drafted = accepted = 0
for i, prompt in enumerate(PROMPTS):
    for sampling in (["--temperature", "0"], ["--temperature", "0.8", "--seed", str(100 + i)]):
        plain = generate(prompt, *sampling)
        spec = generate(prompt, *sampling, "--speculative-ngram", "4")
        drafted += spec["draft_tokens"]
        accepted += spec["accepted_draft_tokens"]
        rate = spec["accepted_draft_tokens"] / max(1, spec["draft_tokens"])
        print(f"prompt {i} {' '.join(sampling)}: {spec['accepted_draft_tokens']}/{spec['draft_tokens']} drafts "
              f"accepted ({100 * rate:.0f}%), decode {plain['decode_tokens_per_second']:.1f} -> "
              f"{spec['decode_tokens_per_second']:.1f} tok/s")
        if spec["token_ids"] != plain["token_ids"] or spec["text"] != plain["text"]:
            print(f"FAIL: prompt {i} {sampling}: speculative output differs\n  {plain['text']!r}\n  {spec['text']!r}")
            failed = True
print(f"acceptance over all prompts: {accepted}/{drafted} ({100 * accepted / max(1, drafted):.1f}%)")
if accepted == 0:
    print("FAIL: no draft was accepted on prompts that repeat text")
    failed = True

# The batching engine: several sequences verify drafts in the same step.
tmp = tempfile.mkdtemp()
path = os.path.join(tmp, "reqs.jsonl")
with open(path, "w") as f:
    for i, prompt in enumerate(PROMPTS):
        f.write(json.dumps({"messages": [{"role": "user", "content": prompt}], "max_tokens": 48,
                            "temperature": 0 if i % 2 == 0 else 0.7, "seed": 7 + i, "n": 1 + i % 2,
                            "logprobs": 2 * (i % 2)}) + "\n")


def batch(*flags):
    cmd = [llmctl, "generate", "--model", model, "--prompts", path, *extra, *flags]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stderr)
        sys.exit(1)
    return [json.loads(l) for l in p.stdout.splitlines()], p.stderr


plain, _ = batch()
spec, err = batch("--speculative-ngram", "3")
print(err.strip().splitlines()[-1])
if plain != spec:
    print(f"FAIL: --prompts outputs differ with --speculative-ngram\n{plain}\n{spec}")
    failed = True
if "speculative drafts" not in err:
    print("FAIL: --prompts with --speculative-ngram reported no drafts")
    failed = True
print("FAIL" if failed else "OK")
sys.exit(1 if failed else 0)
