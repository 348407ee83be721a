#!/usr/bin/env bash
# `llmctl bench serve`, one workload, against `llmctl serve` and llama.cpp's `llama-server` on the
# same machine, model (the default model's Q4_1 GGUF, run quantized by both) and thread count, one
# server at a time. llama.cpp is built by scripts/build-llama-cpp.sh.
# Writes OUT_DIR/{llmctl,llama-server}.{json,csv,svg} and prints both tables.
# Usage: scripts/bench-serve-compare.sh [OUT_DIR] [THREADS] [NUM_PROMPTS] [INPUT_LEN] [OUTPUT_LEN] [RATES]
#        (defaults: bench/results/cpu-serve, nproc, 32, 128, 64, "1,inf"; max concurrency 8)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT=${1:-$ROOT/bench/results/cpu-serve}
THREADS=${2:-$(nproc)}
N=${3:-32}
IN=${4:-128}
OUTLEN=${5:-64}
RATES=${6:-1,inf}
CONC=8
HOME_DIR=${LLMCTL_HOME:-$HOME/.cache/llmctl}
MODEL_DIR="$HOME_DIR/models/SmolLM2-135M-Instruct"
GGUF="$MODEL_DIR/SmolLM2-135M-Instruct.Q4_1.gguf"
LLMCTL=${LLMCTL_BIN:-$ROOT/build/llmctl}
LLAMA_DIR="${LLAMA_CPP_DIR:-$HOME_DIR/llama.cpp}"
LLAMA_SERVER="$LLAMA_DIR/build/bin/llama-server"
mkdir -p "$OUT"
"$ROOT/scripts/fetch-model.sh" --dense >/dev/null
"$ROOT/scripts/build-llama-cpp.sh" llama-server

PID=""
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null || true' EXIT
wait_ready() {  # URL PATH
  for _ in $(seq 600); do
    curl -sf "$1$2" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "server at $1 did not become ready" >&2; exit 1
}
run_bench() {  # NAME URL
  "$LLMCTL" bench serve --url "$2" --tokenizer "$MODEL_DIR/hf" --num-prompts "$N" --input-len "$IN" \
    --output-len "$OUTLEN" --ignore-eos --request-rate "$RATES" --max-concurrency "$CONC" --seed 1 --no-progress \
    --json "$OUT/$1.json" --csv "$OUT/$1.csv" --plot "$OUT/$1.svg"
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), threads $THREADS"
echo "llmctl: $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown); llama.cpp: $(cat "$LLAMA_DIR/VERSION")"
echo "workload: $N requests, $IN prompt tokens, $OUTLEN output tokens (EOS ignored), rates $RATES, max concurrency $CONC"

echo "== llmctl serve (Q4_1 run quantized, --max-num-seqs $CONC)"
"$LLMCTL" serve --model "$GGUF" --port 8931 -t "$THREADS" --max-num-seqs "$CONC" 2>"$OUT/llmctl-server.log" &
PID=$!
wait_ready http://127.0.0.1:8931 /ready
run_bench llmctl http://127.0.0.1:8931
kill -INT "$PID"; wait "$PID" || true; PID=""

echo "== llama-server (Q4_1, $CONC slots, continuous batching)"
"$LLAMA_SERVER" -m "$GGUF" --alias "$(basename "$GGUF")" --port 8932 -t "$THREADS" -np "$CONC" -c $((CONC * (IN + OUTLEN + 64))) \
  2>"$OUT/llama-server.log" >/dev/null &
PID=$!
wait_ready http://127.0.0.1:8932 /health
run_bench llama-server http://127.0.0.1:8932
kill "$PID"; wait "$PID" || true; PID=""
