#!/usr/bin/env bash
# Two llmctl builds in one run, alternating, on the default model's Q4_1 GGUF: 64 mixed requests
# through `generate --prompts` (greedy and seeded sampling, n = 2 on some, logprobs on some,
# EOS ignored), then `bench latency` decode at batch 1 and 32. Prints each run's wall time and
# tokens/s, and whether the two builds' outputs are identical (they must be: a refactor of the step
# changes no token). For changes to the engine's step (issue: schedule -> execute -> update).
# Usage: scripts/bench-engine-ab.sh OLD_LLMCTL NEW_LLMCTL [ROUNDS]   (default 2 rounds; the order
# alternates: old first in odd rounds, new first in even ones)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OLD=$1 NEW=$2 ROUNDS=${3:-2}
MODEL=${LLMCTL_HOME:-$HOME/.cache/llmctl}/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
python3 - "$ROOT/../shared/data/wikitext2-valid.txt" >"$TMP/reqs.jsonl" <<'PY'
import json, random, sys
words = open(sys.argv[1], encoding="utf-8").read().split()
rng = random.Random(11)
for i in range(64):
    s = rng.randrange(len(words) - 300)
    r = {"prompt": " ".join(words[s:s + rng.randint(16, 160)]), "max_tokens": rng.randint(16, 64), "ignore_eos": True}
    if i % 2:
        r.update(temperature=0.8, top_p=0.95, seed=1000 + i)
    else:
        r["temperature"] = 0
    if i % 8 == 3:
        r["n"] = 2
    if i % 8 == 5:
        r["logprobs"] = 2
    print(json.dumps(r))
PY
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
for round in $(seq "$ROUNDS"); do
  order="old new"; [ $((round % 2)) = 0 ] && order="new old"  # alternate which goes first
  for side in $order; do
    bin=$OLD; [ $side = new ] && bin=$NEW
    t0=$(date +%s.%N)
    "$bin" generate --model "$MODEL" --prompts "$TMP/reqs.jsonl" --max-num-seqs 64 --max-num-batched-tokens 512 \
      >"$TMP/$side.jsonl" 2>"$TMP/$side.err"
    t1=$(date +%s.%N)
    echo "round $round $side: generate --prompts $(python3 -c "print(f'{$t1 - $t0:.2f}')") s wall;" \
      "$(grep -o 'in [0-9.]* s: [^|]*' "$TMP/$side.err" | head -1)"
  done
done
cmp -s "$TMP/old.jsonl" "$TMP/new.jsonl" && echo "outputs identical (64 requests)" || echo "OUTPUTS DIFFER"
for round in $(seq "$ROUNDS"); do
  order="old new"; [ $((round % 2)) = 0 ] && order="new old"
  for side in $order; do
    bin=$OLD; [ $side = new ] && bin=$NEW
    "$bin" bench latency --model "$MODEL" --batch 1,32 --input-len 64 --output-len 64 --warmup 1 --json - 2>/dev/null |
      python3 -c "
import json, sys
d = json.load(sys.stdin)
for c in d['rows']:
    print('round $round $side: latency batch', c['batch'], 'decode tok/s (median)', round(c['tg_tok_s_median'], 1),
          'prefill tok/s (median)', round(c['pp_tok_s_median'], 1))
"
  done
done
