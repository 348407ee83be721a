#!/usr/bin/env bash
# The `llmctl bench` rows of docs/PERFORMANCE.md on the default model, CPU: an offline throughput
# sweep over max-num-seqs, a latency matrix (batch x input length) with repetitions, and the
# perplexity of WikiText-2 validation's start. Each writes JSON, CSV and an SVG chart to OUT_DIR.
# Usage: scripts/bench-suite.sh [OUT_DIR] [THREADS]   (defaults: bench/results/cpu-suite, nproc)
# Environment: LLMCTL_BIN (default build/llmctl), QUICK=1 for a smaller sweep.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT=${1:-$ROOT/bench/results/cpu-suite}
THREADS=${2:-$(nproc)}
LLMCTL=${LLMCTL_BIN:-$ROOT/build/llmctl}
MODEL=${LLMCTL_HOME:-$HOME/.cache/llmctl}/models/SmolLM2-135M-Instruct/hf
DATA="$ROOT/../shared/data/wikitext2-valid.txt"
mkdir -p "$OUT"
"$ROOT/scripts/fetch-model.sh" --dense >/dev/null

if [ "${QUICK:-}" = 1 ]; then
  TP=(--num-prompts 8 --input-len 64 --output-len 16 --sweep max-num-seqs=1,8)
  LAT=(--batch 1,4 --input-len 64 --output-len 16 --repetitions 2)
  PPL_TOKENS=1000
else
  TP=(--num-prompts 32 --input-len 128 --output-len 64 --sweep max-num-seqs=1,8,32)
  LAT=(--batch 1,8 --input-len 128,512 --output-len 32 --repetitions 3)
  PPL_TOKENS=4096
fi

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), threads $THREADS"
echo "llmctl: $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)"
set -x
"$LLMCTL" bench throughput --model "$MODEL" -t "$THREADS" "${TP[@]}" \
  --json "$OUT/throughput.json" --csv "$OUT/throughput.csv" --plot "$OUT/throughput.svg"
"$LLMCTL" bench latency --model "$MODEL" -t "$THREADS" "${LAT[@]}" \
  --json "$OUT/latency.json" --csv "$OUT/latency.csv" --plot "$OUT/latency.svg"
"$LLMCTL" bench ppl --model "$MODEL" -t "$THREADS" --text "$DATA" --ctx 512 --stride 256 --max-tokens "$PPL_TOKENS" \
  --json "$OUT/ppl.json" --csv "$OUT/ppl.csv"
