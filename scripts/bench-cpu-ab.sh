#!/usr/bin/env bash
# Two llmctl builds and llama.cpp's llama-bench, alternated round by round on the same GGUFs and the
# same thread count, so a kernel change is measured against its baseline in the same minutes (a
# shared VM's speed drifts by 20% between runs taken apart).
# Usage: scripts/bench-cpu-ab.sh OLD_LLMCTL NEW_LLMCTL GGUF...
# Environment: THREADS (default nproc), PP (prompt tokens, 128), TG (generated tokens, 64), ROUNDS (3).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
[ $# -ge 3 ] || { echo "usage: $0 OLD_LLMCTL NEW_LLMCTL GGUF..." >&2; exit 2; }
OLD=$1 NEW=$2; shift 2
THREADS=${THREADS:-$(nproc)} PP=${PP:-128} TG=${TG:-64} ROUNDS=${ROUNDS:-3}
LLAMA=${LLAMA_CPP_DIR:-${LLMCTL_HOME:-$HOME/.cache/llmctl}/llama.cpp}
PROMPT=$(head -c 40000 "$ROOT/../shared/data/wikitext2-valid.txt" | tr -s ' \n' ' ' | cut -c1-$((PP * 4)))
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), threads $THREADS"
for model in "$@"; do
  name=$(basename "$model")
  for round in $(seq "$ROUNDS"); do
    for side in old new; do
      bin=$OLD; [ "$side" = new ] && bin=$NEW
      "$bin" generate --model "$model" -t "$THREADS" --temperature 0 --ignore-eos -n "$TG" --json "$PROMPT" 2>/dev/null |
        python3 -c "import json,sys; j=json.load(sys.stdin); print(f\"llmctl $side $name round $round: prompt {j['prompt_tokens']} tok, prefill {j['prefill_tokens_per_second']:.0f} tok/s, decode {j['decode_tokens_per_second']:.0f} tok/s\")"
    done
    "$LLAMA/build/bin/llama-bench" -m "$model" -t "$THREADS" -p "$PP" -n "$TG" -r 3 -o csv 2>/dev/null |
      python3 -c "
import csv, sys
for r in csv.DictReader(sys.stdin):
    test = f\"pp{r['n_prompt']}\" if int(r['n_prompt']) else f\"tg{r['n_gen']}\"
    print(f\"llama.cpp $name round $round: {test} {float(r['avg_ts']):.0f} +- {float(r['stddev_ts']):.0f} tok/s\")"
  done
done
