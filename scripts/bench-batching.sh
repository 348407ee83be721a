#!/usr/bin/env bash
# Batching engine on the CPU: 64 requests of mixed lengths (WikiText prompts of 16-200 words,
# 16-64 new tokens, greedy, EOS ignored) through `generate --prompts`, batched, and the same
# requests one at a time (--max-num-seqs 1); prints requests/s, tokens/s and KV waste.
# Usage: scripts/bench-batching.sh [NUM_PROMPTS] [MAX_NUM_SEQS]   (defaults 64 64)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
N=${1:-64}
SEQS=${2:-64}
MODEL=${LLMCTL_HOME:-$HOME/.cache/llmctl}/models/SmolLM2-135M-Instruct/hf
LLMCTL=${LLMCTL_BIN:-$ROOT/build/llmctl}
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
python3 - "$ROOT/../shared/data/wikitext2-valid.txt" "$N" >"$TMP/reqs.jsonl" <<'PY'
import json, random, sys
words = open(sys.argv[1], encoding="utf-8").read().split()
rng = random.Random(7)
for _ in range(int(sys.argv[2])):
    s = rng.randrange(len(words) - 500)
    print(json.dumps({"prompt": " ".join(words[s:s + rng.randint(16, 200)]), "max_tokens": rng.randint(16, 64),
                      "temperature": 0, "ignore_eos": True}))
PY
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $N requests"
echo "batched (--max-num-seqs $SEQS --max-num-batched-tokens 512):"
"$LLMCTL" generate --model "$MODEL" --prompts "$TMP/reqs.jsonl" --max-num-seqs "$SEQS" --max-num-batched-tokens 512 \
  2>&1 >"$TMP/batched.jsonl" | sed 's/^/  /'
echo "one at a time (--max-num-seqs 1):"
"$LLMCTL" generate --model "$MODEL" --prompts "$TMP/reqs.jsonl" --max-num-seqs 1 --max-num-batched-tokens 512 \
  2>&1 >"$TMP/solo.jsonl" | sed 's/^/  /'
cmp -s "$TMP/batched.jsonl" "$TMP/solo.jsonl" && echo "outputs identical" || echo "OUTPUTS DIFFER"
